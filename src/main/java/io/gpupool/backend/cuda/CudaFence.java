package io.gpupool.backend.cuda;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.StreamFence;
import jcuda.driver.CUevent;
import jcuda.driver.CUresult;

import java.util.concurrent.atomic.AtomicBoolean;

import static jcuda.driver.JCudaDriver.cuEventQuery;
import static jcuda.driver.JCudaDriver.cuEventSynchronize;
import static jcuda.driver.JCudaDriver.cuStreamWaitEvent;

/**
 * A fence on a CUDA stream: a timing-free event recorded on it. {@link #makeWait} is a device-side
 * wait (cuStreamWaitEvent): the waiting stream's later work starts after the event, the host never
 * blocks. {@link #close} (once) hands the event back to the recording stream's {@link EventRecycler},
 * which keeps it for a later fence or destroys it; either is safe while the event is still pending:
 * a re-record overwrites it for later queries only, waits already enqueued keep the state they
 * captured, and the driver keeps a destroyed pending event alive until it completes. A closed fence
 * refuses every other call, so a stale reference never reads an event that now belongs to a newer fence.
 */
final class CudaFence implements StreamFence {

    private final CudaDevice device;
    private final CUevent event;
    private final EventRecycler<CUevent> recycler;
    private final AtomicBoolean closed = new AtomicBoolean();

    CudaFence(CudaDevice device, CUevent event, EventRecycler<CUevent> recycler) {
        this.device = device;
        this.event = event;
        this.recycler = recycler;
    }

    @Override
    public boolean isComplete() {
        checkOpen();
        device.makeCurrent();
        int result = cuEventQuery(event);
        if (result == CUresult.CUDA_SUCCESS) {
            return true;
        }
        if (result == CUresult.CUDA_ERROR_NOT_READY) {
            return false;
        }
        throw new CudaDriverException("cuEventQuery", result, "fence on " + device.label());
    }

    @Override
    public void makeWait(AllocationStream stream) {
        checkOpen();
        if (!(stream instanceof CudaStream other)) {
            throw new IllegalArgumentException("a CUDA fence can only make a CUDA stream wait, got " + stream);
        }
        other.device().makeCurrent();
        Cu.check("cuStreamWaitEvent", cuStreamWaitEvent(other.handle(), event, 0), "stream " + other.ordinal());
    }

    @Override
    public void await() {
        checkOpen();
        device.makeCurrent();
        Cu.check("cuEventSynchronize", cuEventSynchronize(event), "fence on " + device.label());
    }

    /** Returns the event to its stream's recycler (no driver call unless the recycler is full or closed). */
    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            recycler.release(event);
        }
    }

    private void checkOpen() {
        if (closed.get()) {
            throw new IllegalStateException("fence on " + device.label() + " is closed");
        }
    }
}
