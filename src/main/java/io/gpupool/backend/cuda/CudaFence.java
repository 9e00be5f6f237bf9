package io.gpupool.backend.cuda;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.StreamFence;
import jcuda.driver.CUevent;
import jcuda.driver.CUresult;

import java.util.concurrent.atomic.AtomicBoolean;

import static jcuda.driver.JCudaDriver.cuEventDestroy;
import static jcuda.driver.JCudaDriver.cuEventQuery;
import static jcuda.driver.JCudaDriver.cuEventSynchronize;
import static jcuda.driver.JCudaDriver.cuStreamWaitEvent;

/**
 * A fence on a CUDA stream: a timing-free event recorded on it. {@link #makeWait} is a device-side
 * wait (cuStreamWaitEvent): the waiting stream's later work starts after the event, the host never
 * blocks. {@link #close} destroys the event (once); the driver keeps a recorded event alive until it
 * completes, so closing early is safe.
 */
final class CudaFence implements StreamFence {

    private final CudaDevice device;
    private final CUevent event;
    private final AtomicBoolean closed = new AtomicBoolean();

    CudaFence(CudaDevice device, CUevent event) {
        this.device = device;
        this.event = event;
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

    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            device.makeCurrent();
            Cu.check("cuEventDestroy", cuEventDestroy(event));
        }
    }

    private void checkOpen() {
        if (closed.get()) {
            throw new IllegalStateException("fence on " + device.label() + " is closed");
        }
    }
}
