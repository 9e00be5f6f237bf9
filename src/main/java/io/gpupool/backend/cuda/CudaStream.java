package io.gpupool.backend.cuda;

import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.GraphCaptureException;
import io.gpupool.backend.KernelFunction;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.StreamFence;
import io.gpupool.memory.SyncMarks;
import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;
import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;

import java.lang.foreign.MemorySegment;
import java.util.Objects;
import java.util.function.Function;

import static jcuda.driver.JCudaDriver.cuEventCreate;
import static jcuda.driver.JCudaDriver.cuEventDestroy;
import static jcuda.driver.JCudaDriver.cuEventElapsedTime;
import static jcuda.driver.JCudaDriver.cuEventSynchronize;
import static jcuda.driver.JCudaDriver.cuEventRecord;
import static jcuda.driver.JCudaDriver.cuMemcpyDtoDAsync;
import static jcuda.driver.JCudaDriver.cuMemcpyDtoHAsync;
import static jcuda.driver.JCudaDriver.cuMemcpyHtoDAsync;
import static jcuda.driver.JCudaDriver.cuMemsetD8Async;
import static jcuda.driver.JCudaDriver.cuStreamCreate;
import static jcuda.driver.JCudaDriver.cuStreamDestroy;
import static jcuda.driver.JCudaDriver.cuStreamSynchronize;
import static io.gpupool.backend.StreamChecks.checkBytes;
import static io.gpupool.backend.StreamChecks.checkCopy;
import static io.gpupool.backend.StreamChecks.rethrow;

/**
 * A non-blocking CUDA stream (cuStreamCreate with CU_STREAM_NON_BLOCKING) plus a host worker for the
 * work that must run on the CPU in stream order.
 *
 * <h2>Copies go through pinned staging</h2>
 * Java heap and ordinary native memory are pageable, and the driver cannot copy pageable memory
 * asynchronously. Host↔device copies are therefore split into pieces of one staging slot each:
 * <pre>
 *   host→device, per piece:  acquire slot ─ memcpy host→slot (caller thread) ─ cuMemcpyHtoDAsync
 *                            ─ record event ─ worker: wait event, release slot
 *   device→host, per piece:  acquire slot ─ cuMemcpyDtoHAsync ─ record event
 *                            ─ worker: wait event, memcpy slot→host, release slot
 * </pre>
 * Slots come from the device's {@link PinnedStagingPool} (the pool core over cuMemHostAlloc chunks);
 * acquiring blocks while the bound of slots in flight is reached. The host segment must stay valid
 * until {@link #synchronize()} (device→host).
 *
 * <h2>Host tasks</h2>
 * {@link #enqueueHostTask} runs the task on the worker after all device work enqueued before it;
 * device work enqueued after it does not wait for it (see {@link CudaStreamWorker}).
 *
 * <h2>Launches</h2>
 * {@link #launch} checks the kernel and its arguments here; the stream's {@link KernelLauncher}, chosen when the
 * stream is created, marshals them and calls the driver: through FFM into a native argument buffer the stream owns
 * ({@link FfmKernelLauncher}: a stream is leased to one user at a time, so its launches never contend for it), or
 * through JCuda where the FFM binding cannot be made or the backend's options ask for JCuda.
 *
 * <h2>Graph capture</h2>
 * While {@link CudaGraphCapture} records the stream, copies are not enqueued (staging slots and the
 * worker's event waits cannot be captured) but reported ({@link CaptureRedirect}); launches, fills
 * and device copies go to the driver, which records them; host tasks and fences fail.
 *
 * <h2>Events are recycled</h2>
 * Fences ({@link #recordFence}) and the worker's entries both need a timing-free event. They take it
 * from the stream's {@link EventRecycler} (at most {@link #SPARE_EVENTS} idle) and give it back when
 * the fence is closed or the worker entry is done, so a steady state records events without creating
 * or destroying any. Closing the stream destroys the spare events; fences still open then destroy
 * their event when they are closed.
 */
public final class CudaStream implements DeviceStream {

    private final CudaDevice device;
    private final int ordinal;
    private final Cu.StreamHandle stream = new Cu.StreamHandle();
    private final CudaStreamWorker worker;
    private final EventRecycler<CUevent> events;
    private final CudaStreamWorker.Cleanup recycleEvent;
    private final PinnedStagingPool.StagingStream stagingTwin;
    private final KernelLauncher launcher;
    /** Host synchronisations, for the pool's lazy fences (read by any thread). */
    private final SyncMarks syncs = new SyncMarks();
    /** Read by other threads: the pool's maintenance and close record fences on any stream. */
    private volatile boolean closed;
    /**
     * Set while {@link CudaGraphCapture} records this stream (its own stream, used by the capturing
     * thread alone): copies are reported to it instead of enqueued, synchronize returns at once.
     * Volatile: a fence asked by another thread (which must never happen: the capture stream is no pool
     * stream) has to see it and fail rather than record an event into the capture.
     */
    private volatile CaptureRedirect capture;

    /** Where a capturing stream's copies go (see {@link io.gpupool.backend.GraphCapture}'s rules). */
    interface CaptureRedirect {
        void hostToDevice(long deviceAddress, long bytes);

        void deviceToHost(long deviceAddress, long bytes);

        /** Device work is being recorded (a launch, fill or device copy). */
        void deviceWork(String what);
    }

    /** Most idle events a stream keeps for later fences and worker entries. */
    static final int SPARE_EVENTS = 64;

    CudaStream(CudaDevice device, int ordinal) {
        this(device, ordinal, SPARE_EVENTS);
    }

    /** {@code spareEvents} = 0 turns event recycling off (benchmark baseline: create and destroy per fence). */
    CudaStream(CudaDevice device, int ordinal, int spareEvents) {
        this(device, ordinal, spareEvents, device::launcherFor);
    }

    /** {@code launchers} picks the launch path (benchmarks and tests compare them; see {@link KernelLauncher}). */
    CudaStream(CudaDevice device, int ordinal, int spareEvents, Function<Cu.StreamHandle, KernelLauncher> launchers) {
        this.device = device;
        this.ordinal = ordinal;
        this.events = new EventRecycler<>(new DriverEvents(device), spareEvents, device.label() + " stream " + ordinal);
        this.recycleEvent = events::release;
        device.makeCurrent();
        Cu.check("cuStreamCreate", cuStreamCreate(stream, CUstream_flags.CU_STREAM_NON_BLOCKING),
                device.label() + " stream " + ordinal);
        this.worker = new CudaStreamWorker(device, "gpupool-" + device.label() + "-stream-" + ordinal);
        this.stagingTwin = new PinnedStagingPool.StagingStream(ordinal);
        this.launcher = launchers.apply(stream);
    }

    /** "ffm" or "jcuda": how this stream's launches reach the driver (package use: tests and benchmarks). */
    String launchPath() {
        return launcher.path();
    }

    /** The stream's event recycler (package use: tests and benchmarks read its counters). */
    EventRecycler<CUevent> events() {
        return events;
    }

    /** The JCuda stream handle (package use only). */
    CUstream handle() {
        return stream;
    }

    /** The CUstream as a raw address, for libraries bound through FFM (package use only). */
    long nativeHandle() {
        return stream.address();
    }

    @Override
    public int ordinal() {
        return ordinal;
    }

    @Override
    public CudaDevice device() {
        return device;
    }

    @Override
    public boolean capturing() {
        return capture != null;
    }

    /** Starts ({@code redirect} non-null) or ends redirecting copies for a capture. */
    void redirectForCapture(CaptureRedirect redirect) {
        this.capture = redirect;
    }

    @Override
    public StreamFence recordFence() {
        if (capture != null) {
            throw new GraphCaptureException("a fence was asked of " + this + " while it captures a graph");
        }
        if (closed) {
            return StreamFence.completed(); // close() synchronised: nothing queued remains
        }
        CUevent event = events.acquire();
        device.makeCurrent();
        int result = cuEventRecord(event, stream);
        if (result != 0) {
            events.release(event);
            Cu.check("cuEventRecord", result, "fence on stream " + ordinal);
        }
        return new CudaFence(device, event, events);
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
    public void copyHostToDevice(MemorySegment source, long deviceAddress, long bytes) {
        checkCopy(source, bytes);
        if (capture != null) {
            capture.hostToDevice(deviceAddress, bytes);
            return;
        }
        device.makeCurrent();
        PinnedStagingPool staging = device.staging();
        long slotBytes = staging.slotBytes();
        for (long offset = 0; offset < bytes; offset += slotBytes) {
            long piece = Math.min(slotBytes, bytes - offset);
            DeviceBlock slot = staging.acquire(stagingTwin);
            try {
                MemorySegment.copy(source, offset, PinnedStagingPool.segment(slot.address(), piece), 0, piece);
                Cu.check("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync(Cu.device(deviceAddress + offset), Cu.host(slot.address()),
                        piece, stream), piece + " bytes to 0x" + Long.toHexString(deviceAddress + offset));
            } catch (RuntimeException e) {
                staging.release(slot);
                throw e;
            }
            afterDeviceWork(null, event -> {
                staging.release(slot);
                events.release(event);
            });
        }
    }

    @Override
    public void copyDeviceToHost(long deviceAddress, MemorySegment destination, long bytes) {
        checkCopy(destination, bytes);
        if (capture != null) {
            capture.deviceToHost(deviceAddress, bytes);
            return;
        }
        device.makeCurrent();
        PinnedStagingPool staging = device.staging();
        long slotBytes = staging.slotBytes();
        for (long offset = 0; offset < bytes; offset += slotBytes) {
            long piece = Math.min(slotBytes, bytes - offset);
            DeviceBlock slot = staging.acquire(stagingTwin);
            try {
                Cu.check("cuMemcpyDtoHAsync", cuMemcpyDtoHAsync(Cu.host(slot.address()), Cu.device(deviceAddress + offset),
                        piece, stream), piece + " bytes from 0x" + Long.toHexString(deviceAddress + offset));
            } catch (RuntimeException e) {
                staging.release(slot);
                throw e;
            }
            long at = offset;
            afterDeviceWork(() -> MemorySegment.copy(PinnedStagingPool.segment(slot.address(), piece), 0, destination, at, piece),
                    event -> {
                        staging.release(slot);
                        events.release(event);
                    });
        }
    }

    @Override
    public void copyDeviceToDevice(long sourceAddress, long destinationAddress, long bytes) {
        checkBytes(bytes);
        if (capture != null) {
            capture.deviceWork("a device-to-device copy");
        }
        device.makeCurrent();
        Cu.check("cuMemcpyDtoDAsync", cuMemcpyDtoDAsync(Cu.device(destinationAddress), Cu.device(sourceAddress),
                bytes, stream), bytes + " bytes");
    }

    @Override
    public void fill(long deviceAddress, byte value, long bytes) {
        checkBytes(bytes);
        if (capture != null) {
            capture.deviceWork("a fill");
        }
        device.makeCurrent();
        Cu.check("cuMemsetD8Async", cuMemsetD8Async(Cu.device(deviceAddress), value, bytes, stream),
                bytes + " bytes at 0x" + Long.toHexString(deviceAddress));
    }

    @Override
    public void launch(KernelFunction function, int gridX, int gridY, int gridZ, int blockX, int blockY, int blockZ,
                       int sharedMemoryBytes, Object... arguments) {
        if (!(function instanceof CudaFunction kernel)) {
            throw new IllegalArgumentException("not a CUDA kernel: " + function);
        }
        if (kernel.device() != device) {
            throw new IllegalArgumentException("kernel " + kernel.name() + " was loaded on " + kernel.device().label()
                    + ", not on " + device.label());
        }
        KernelLauncher.checkArguments(kernel.name(), arguments);
        if (capture != null) {
            capture.deviceWork("launch of " + kernel.name());
        }
        device.makeCurrent();
        Cu.check("cuLaunchKernel", launcher.launch(kernel, gridX, gridY, gridZ, blockX, blockY, blockZ,
                sharedMemoryBytes, arguments), kernel.name());
    }

    @Override
    public void enqueueHostTask(Runnable task) {
        Objects.requireNonNull(task, "task");
        if (capture != null) {
            throw new GraphCaptureException("a host task was enqueued on " + this + " while it captures a graph");
        }
        device.makeCurrent();
        afterDeviceWork(task, recycleEvent);
    }

    /**
     * Two timing events of their own (the recycled ones are created without timing) around {@code work}; waits for
     * the second and reads the time between them.
     */
    @Override
    public double timeMillis(Runnable work) {
        if (capture != null) {
            throw new GraphCaptureException("a timing was asked of " + this + " while it captures a graph");
        }
        device.makeCurrent();
        CUevent start = new CUevent();
        CUevent end = new CUevent();
        Cu.check("cuEventCreate", cuEventCreate(start, CUevent_flags.CU_EVENT_DEFAULT), "timing on stream " + ordinal);
        try {
            Cu.check("cuEventCreate", cuEventCreate(end, CUevent_flags.CU_EVENT_DEFAULT), "timing on stream " + ordinal);
            try {
                Cu.check("cuEventRecord", cuEventRecord(start, stream), "timing on stream " + ordinal);
                work.run();
                device.makeCurrent();
                Cu.check("cuEventRecord", cuEventRecord(end, stream), "timing on stream " + ordinal);
                Cu.check("cuEventSynchronize", cuEventSynchronize(end), "timing on stream " + ordinal);
                float[] millis = new float[1];
                Cu.check("cuEventElapsedTime", cuEventElapsedTime(millis, start, end), "timing on stream " + ordinal);
                return millis[0];
            } finally {
                cuEventDestroy(end);
            }
        } finally {
            cuEventDestroy(start);
        }
    }

    @Override
    public void synchronize() {
        if (capture != null) {
            return; // nothing recorded runs until the graph is launched
        }
        long sync = syncs.begin();
        device.makeCurrent();
        int result = cuStreamSynchronize(stream);
        worker.drain();
        Throwable hostFailure = worker.takeFailure();
        Cu.check("cuStreamSynchronize", result, "stream " + ordinal + " on " + device.label());
        rethrow(hostFailure, "host work on a CUDA stream");
        syncs.returned(sync);
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        device.makeCurrent();
        int result = cuStreamSynchronize(stream);
        worker.drain();
        worker.stop();
        syncs.closed();
        Throwable hostFailure = worker.takeFailure();
        try {
            events.close();
        } catch (RuntimeException e) {
            hostFailure = hostFailure == null ? e : hostFailure;
        }
        Cu.check("cuStreamDestroy", cuStreamDestroy(stream));
        Cu.check("cuStreamSynchronize", result, "closing stream " + ordinal);
        rethrow(hostFailure, "host work on a CUDA stream");
    }

    @Override
    public String toString() {
        return device.label() + " stream " + ordinal;
    }

    /** Records an event now and has the worker run {@code task} and then {@code cleanup} after it. */
    private void afterDeviceWork(Runnable task, CudaStreamWorker.Cleanup cleanup) {
        CUevent event = events.acquire();
        int result = cuEventRecord(event, stream);
        if (result != 0) {
            events.release(event);
            Cu.check("cuEventRecord", result, "stream " + ordinal);
        }
        worker.submit(event, task, cleanup);
    }

    /** Timing-free events of {@code device}'s context: {@link EventRecycler}'s driver calls. */
    private record DriverEvents(CudaDevice device) implements EventRecycler.Events<CUevent> {

        @Override
        public CUevent create() {
            device.makeCurrent();
            CUevent event = new CUevent();
            Cu.check("cuEventCreate", cuEventCreate(event, CUevent_flags.CU_EVENT_DISABLE_TIMING), device.label());
            return event;
        }

        @Override
        public void destroy(CUevent event) {
            device.makeCurrent();
            Cu.check("cuEventDestroy", cuEventDestroy(event), device.label());
        }
    }
}
