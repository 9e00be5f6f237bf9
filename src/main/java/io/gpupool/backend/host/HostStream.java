package io.gpupool.backend.host;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.KernelFunction;
import io.gpupool.memory.StreamFence;
import io.gpupool.memory.SyncMarks;

import java.lang.foreign.MemorySegment;
import java.util.Objects;

import static io.gpupool.backend.StreamChecks.checkBytes;
import static io.gpupool.backend.StreamChecks.checkCopy;
import static io.gpupool.backend.StreamChecks.rethrow;

/**
 * A host "stream": one worker thread with an ordered queue ({@link OrderedWorker}). Copies and fills
 * are plain memory operations on native addresses, run by the worker in queue order; device
 * addresses are native addresses of off-heap memory from this backend's chunk source or allocator.
 *
 * <p>Kernels do not exist on the host: {@link #launch} throws, and host kernels are run with
 * {@link #enqueueHostTask}, which gives them the same ordering as device work on a GPU stream.
 *
 * <p>A fence is the ticket of the last queued task and holds nothing native, so fences of the same
 * ticket are interchangeable: {@link #recordFence} hands out the previous fence again while no task
 * was queued since, so a pool freeing again and again on an idle stream allocates no new fence.
 */
final class HostStream implements DeviceStream {

    private final HostDevice device;
    private final int ordinal;
    private final OrderedWorker worker;
    /** The fence recorded last; immutable, so a racy read only costs a new fence. */
    private volatile HostFence lastFence;
    /** Host synchronisations, for the pool's lazy fences (read by any thread). */
    private final SyncMarks syncs = new SyncMarks();

    HostStream(HostDevice device, int ordinal) {
        this.device = device;
        this.ordinal = ordinal;
        this.worker = new OrderedWorker("gpupool-host-stream-" + ordinal);
    }

    OrderedWorker worker() {
        return worker;
    }

    @Override
    public int ordinal() {
        return ordinal;
    }

    @Override
    public StreamFence recordFence() {
        long ticket = worker.lastTicket();
        HostFence last = lastFence;
        if (last != null && last.ticket() == ticket) {
            return last; // nothing queued since: the same point in the queue
        }
        HostFence fence = new HostFence(worker, ticket);
        lastFence = fence;
        return fence;
    }

    @Override
    public long syncMark() {
        return syncs.mark();
    }

    @Override
    public boolean synchronizedSince(long mark) {
        return syncs.since(mark);
    }

    @Override
    public ComputeDevice device() {
        return device;
    }

    @Override
    public void copyHostToDevice(MemorySegment source, long deviceAddress, long bytes) {
        checkCopy(source, bytes);
        worker.submit(() -> MemorySegment.copy(source, 0, nativeAt(deviceAddress, bytes), 0, bytes));
    }

    @Override
    public void copyDeviceToHost(long deviceAddress, MemorySegment destination, long bytes) {
        checkCopy(destination, bytes);
        worker.submit(() -> MemorySegment.copy(nativeAt(deviceAddress, bytes), 0, destination, 0, bytes));
    }

    @Override
    public void copyDeviceToDevice(long sourceAddress, long destinationAddress, long bytes) {
        checkBytes(bytes);
        worker.submit(() -> MemorySegment.copy(nativeAt(sourceAddress, bytes), 0,
                nativeAt(destinationAddress, bytes), 0, bytes));
    }

    @Override
    public void fill(long deviceAddress, byte value, long bytes) {
        checkBytes(bytes);
        worker.submit(() -> nativeAt(deviceAddress, bytes).fill(value));
    }

    /** Always throws: the host has no kernels; run host code with {@link #enqueueHostTask}. */
    @Override
    public void launch(KernelFunction function, int gridX, int gridY, int gridZ, int blockX, int blockY, int blockZ,
                       int sharedMemoryBytes, Object... arguments) {
        throw new UnsupportedOperationException("the host backend has no kernels (launch of "
                + (function == null ? "null" : function.name()) + "); run host code with enqueueHostTask");
    }

    @Override
    public void enqueueHostTask(Runnable task) {
        worker.submit(Objects.requireNonNull(task, "task"));
    }

    /**
     * Runs {@code task} in stream order: queued like {@link #enqueueHostTask}, or, on a closed stream
     * (whose work has all finished), on the calling thread. For releases that may outlive the stream,
     * such as model weights freed after their loading stream closed.
     */
    void runInStreamOrder(Runnable task) {
        if (!worker.submitOrAwaitStop(task)) {
            task.run();
        }
    }

    @Override
    public void synchronize() {
        long sync = syncs.begin();
        worker.awaitTicket(worker.lastTicket());
        rethrow(worker.takeFailure(), "work on a host stream");
        syncs.returned(sync);
    }

    @Override
    public void close() {
        worker.stop();
        syncs.closed();
        rethrow(worker.takeFailure(), "work on a host stream");
    }

    @Override
    public String toString() {
        return "host stream " + ordinal;
    }

    private static MemorySegment nativeAt(long address, long bytes) {
        return MemorySegment.ofAddress(address).reinterpret(bytes);
    }
}
