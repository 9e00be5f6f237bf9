package io.gpupool.model.testing;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.KernelFunction;
import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.StreamFence;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A test-only host stream: one worker thread runs enqueued work in order; the first failure is
 * kept and rethrown by {@link #synchronize()} (later work is skipped, as a failed CUDA stream would).
 * Device addresses are native host addresses.
 */
public final class TestStream implements DeviceStream {

    private final int ordinal;
    private final ExecutorService worker = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, "test-stream");
        t.setDaemon(true);
        return t;
    });
    private final AtomicReference<RuntimeException> failure = new AtomicReference<>();
    private volatile Future<?> last;
    /** Host tasks that should throw, for failure tests: the n-th task (1-based) fails; 0 = never. */
    private volatile int failAtTask;
    private int tasks;

    public TestStream(int ordinal) {
        this.ordinal = ordinal;
    }

    public void failAtTask(int n) {
        this.failAtTask = n;
        this.tasks = 0;
    }

    private static MemorySegment at(long address, long bytes) {
        return MemorySegment.ofAddress(address).reinterpret(bytes);
    }

    private void submit(Runnable work) {
        last = worker.submit(() -> {
            if (failure.get() != null) {
                return;
            }
            try {
                work.run();
            } catch (RuntimeException e) {
                failure.compareAndSet(null, e);
            }
        });
    }

    @Override
    public int ordinal() {
        return ordinal;
    }

    @Override
    public StreamFence recordFence() {
        Future<?> at = last;
        return new StreamFence() {
            @Override
            public boolean isComplete() {
                return at == null || at.isDone();
            }

            @Override
            public void makeWait(AllocationStream stream) {
                await();
            }

            @Override
            public void await() {
                try {
                    if (at != null) {
                        at.get();
                    }
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            }

            @Override
            public void close() {
            }
        };
    }

    @Override
    public ComputeDevice device() {
        return null;
    }

    @Override
    public void copyHostToDevice(MemorySegment source, long deviceAddress, long bytes) {
        submit(() -> MemorySegment.copy(source, 0, at(deviceAddress, bytes), 0, bytes));
    }

    @Override
    public void copyDeviceToHost(long deviceAddress, MemorySegment destination, long bytes) {
        submit(() -> MemorySegment.copy(at(deviceAddress, bytes), 0, destination, 0, bytes));
    }

    @Override
    public void copyDeviceToDevice(long sourceAddress, long destinationAddress, long bytes) {
        submit(() -> MemorySegment.copy(at(sourceAddress, bytes), 0, at(destinationAddress, bytes), 0, bytes));
    }

    @Override
    public void fill(long deviceAddress, byte value, long bytes) {
        submit(() -> at(deviceAddress, bytes).fill(value));
    }

    @Override
    public void launch(KernelFunction function, int gridX, int gridY, int gridZ, int blockX, int blockY, int blockZ,
                       int sharedMemoryBytes, Object... arguments) {
        throw new UnsupportedOperationException("host stream has no kernels");
    }

    @Override
    public void enqueueHostTask(Runnable task) {
        submit(() -> {
            int n = failAtTask;
            if (n > 0 && ++tasks == n) {
                throw new IllegalStateException("injected failure in host task " + n);
            }
            task.run();
        });
    }

    @Override
    public void synchronize() {
        Future<?> at = last;
        try {
            if (at != null) {
                at.get();
            }
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
        RuntimeException failed = failure.getAndSet(null);
        if (failed != null) {
            throw failed;
        }
    }

    @Override
    public void close() {
        worker.shutdown();
    }
}
