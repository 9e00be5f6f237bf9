package io.gpupool.model.graph;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceGraph;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.GraphCapture;
import io.gpupool.backend.GraphCaptureException;
import io.gpupool.backend.KernelFunction;
import io.gpupool.memory.StreamFence;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

/**
 * A capturing backend for the host, where kernels are host tasks: the capture stream records each
 * task (and fill, device copy) instead of running it, and a graph's launch enqueues them all on the
 * launching stream. It obeys the {@link GraphCapture} contract (copies reported, not recorded, and only
 * before / after the device work) so the cache and replay logic can be tested without a GPU. Counts
 * graphs alive, and can be told to fail the next capture at any point a CUDA capture can fail
 * ({@link FailAt}), to fail the next warm-up run on its stream, and to hold a capture's body until
 * released (to load the server while a capture is in progress).
 */
final class RecordingGraphCapture implements GraphCapture {

    /** Where the next capture fails, as the driver would fail it. */
    enum FailAt {
        /** cuStreamBeginCapture refuses. */
        BEGIN,
        /** The first recorded operation is refused (an unsupported call invalidates the capture). */
        BODY,
        /** cuStreamEndCapture reports the capture invalidated. */
        END,
        /** cuGraphInstantiate refuses the graph. */
        INSTANTIATE
    }

    private final ComputeDevice device;
    final AtomicInteger liveGraphs = new AtomicInteger();
    final AtomicInteger begun = new AtomicInteger();
    volatile boolean failNextEnd;
    /** The next launch of any graph throws. */
    volatile boolean failNextLaunch;
    /** The next capture fails there (then the flag clears). */
    volatile FailAt failNext;
    /** Every capture fails there (until cleared). */
    volatile FailAt failAlways;
    /** The next warm-up run on {@link #stream()} fails at its first device work. */
    volatile boolean failNextWarmUp;
    /** While set, a capture's first recorded operation waits for it (at most 30 s). */
    volatile CountDownLatch holdBody;
    /** Counted down when a held capture reaches its body. */
    final CountDownLatch bodyReached = new CountDownLatch(1);
    /** The thread of the capture in progress, or null. */
    volatile Thread capturingThread;
    private Recording recording;
    private boolean closed;
    /** The facility's own stream (warm-up runs go here): a host stream that can be told to fail. */
    private final WarmUpStream stream;

    RecordingGraphCapture(ComputeDevice device) {
        this.device = device;
        this.stream = new WarmUpStream(device.createStream(98));
    }

    @Override
    public DeviceStream stream() {
        return stream;
    }

    @Override
    public synchronized boolean capturing() {
        return recording != null;
    }

    @Override
    public synchronized DeviceStream begin(CopyListener copies) {
        if (closed) {
            throw new IllegalStateException("closed");
        }
        if (recording != null) {
            throw new IllegalStateException("a capture is in progress");
        }
        begun.incrementAndGet();
        if (take(FailAt.BEGIN)) {
            throw new GraphCaptureException("cuStreamBeginCapture failed: refused by the test");
        }
        recording = new Recording(device, copies, take(FailAt.BODY), holdBody, bodyReached);
        capturingThread = Thread.currentThread();
        return recording;
    }

    private boolean take(FailAt point) {
        if (failAlways == point) {
            return true;
        }
        if (failNext == point) {
            failNext = null;
            return true;
        }
        return false;
    }

    @Override
    public synchronized DeviceGraph end() {
        Recording done = recording;
        recording = null;
        capturingThread = null;
        if (done == null) {
            throw new IllegalStateException("no capture in progress");
        }
        if (failNextEnd || take(FailAt.END) || done.invalidated) {
            failNextEnd = false;
            throw new GraphCaptureException("cuStreamEndCapture failed: refused by the test");
        }
        if (take(FailAt.INSTANTIATE)) {
            throw new GraphCaptureException("cuGraphInstantiate failed: refused by the test");
        }
        List<Consumer<DeviceStream>> work = List.copyOf(done.work);
        liveGraphs.incrementAndGet();
        return new DeviceGraph() {
            private boolean destroyed;

            @Override
            public void launch(DeviceStream stream) {
                if (destroyed) {
                    throw new IllegalStateException("launch of a destroyed graph");
                }
                if (failNextLaunch) {
                    failNextLaunch = false;
                    throw new IllegalStateException("launch refused by the test");
                }
                work.forEach(step -> step.accept(stream));
            }

            @Override
            public synchronized void close() {
                if (destroyed) {
                    throw new IllegalStateException("graph destroyed twice");
                }
                destroyed = true;
                liveGraphs.decrementAndGet();
            }
        };
    }

    @Override
    public synchronized void abort() {
        recording = null;
        capturingThread = null;
    }

    @Override
    public synchronized void close() {
        closed = true;
        recording = null;
        stream.close();
    }

    private static final class Recording implements DeviceStream {
        private final ComputeDevice device;
        private final CopyListener copies;
        private final List<Consumer<DeviceStream>> work = new ArrayList<>();
        private boolean downloaded;
        private final boolean failBody;
        private final CountDownLatch hold;
        private final CountDownLatch reached;
        /** An operation was refused: the capture can only be aborted or fail at end. */
        volatile boolean invalidated;

        Recording(ComputeDevice device, CopyListener copies, boolean failBody, CountDownLatch hold,
                  CountDownLatch reached) {
            this.device = device;
            this.copies = copies;
            this.failBody = failBody;
            this.hold = hold;
            this.reached = reached;
        }

        private void record(Consumer<DeviceStream> step) {
            if (work.isEmpty() && hold != null) {
                reached.countDown();
                try {
                    if (!hold.await(30, TimeUnit.SECONDS)) {
                        throw new IllegalStateException("the test never released the held capture");
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException(e);
                }
            }
            if (failBody || invalidated) {
                invalidated = true;
                throw new GraphCaptureException("operation not permitted when stream is capturing (refused by the test)");
            }
            if (downloaded) {
                throw new GraphCaptureException("device work after a download");
            }
            work.add(step);
        }

        @Override
        public int ordinal() {
            return 99;
        }

        @Override
        public StreamFence recordFence() {
            throw new GraphCaptureException("fence on a capturing stream");
        }

        @Override
        public ComputeDevice device() {
            return device;
        }

        @Override
        public void copyHostToDevice(MemorySegment source, long deviceAddress, long bytes) {
            if (!work.isEmpty() || downloaded) {
                throw new GraphCaptureException("upload after device work");
            }
            copies.hostToDevice(deviceAddress, bytes);
        }

        @Override
        public void copyDeviceToHost(long deviceAddress, MemorySegment destination, long bytes) {
            downloaded = true;
            copies.deviceToHost(deviceAddress, bytes);
        }

        @Override
        public void copyDeviceToDevice(long sourceAddress, long destinationAddress, long bytes) {
            record(s -> s.copyDeviceToDevice(sourceAddress, destinationAddress, bytes));
        }

        @Override
        public void fill(long deviceAddress, byte value, long bytes) {
            record(s -> s.fill(deviceAddress, value, bytes));
        }

        @Override
        public void launch(KernelFunction function, int gridX, int gridY, int gridZ, int blockX, int blockY,
                           int blockZ, int sharedMemoryBytes, Object... arguments) {
            throw new UnsupportedOperationException("no kernels on the host");
        }

        @Override
        public void enqueueHostTask(Runnable task) {
            record(s -> s.enqueueHostTask(task));
        }

        @Override
        public void synchronize() {
        }

        @Override
        public void close() {
        }
    }

    /** A host stream whose next device work can be made to fail (a warm-up run that fails midway). */
    private final class WarmUpStream implements DeviceStream {
        private final DeviceStream host;

        WarmUpStream(DeviceStream host) {
            this.host = host;
        }

        private void work() {
            if (failNextWarmUp) {
                failNextWarmUp = false;
                throw new IllegalStateException("warm-up refused by the test");
            }
        }

        @Override
        public int ordinal() {
            return host.ordinal();
        }

        @Override
        public StreamFence recordFence() {
            return host.recordFence();
        }

        @Override
        public ComputeDevice device() {
            return host.device();
        }

        @Override
        public void copyHostToDevice(MemorySegment source, long deviceAddress, long bytes) {
            host.copyHostToDevice(source, deviceAddress, bytes);
        }

        @Override
        public void copyDeviceToHost(long deviceAddress, MemorySegment destination, long bytes) {
            host.copyDeviceToHost(deviceAddress, destination, bytes);
        }

        @Override
        public void copyDeviceToDevice(long sourceAddress, long destinationAddress, long bytes) {
            work();
            host.copyDeviceToDevice(sourceAddress, destinationAddress, bytes);
        }

        @Override
        public void fill(long deviceAddress, byte value, long bytes) {
            work();
            host.fill(deviceAddress, value, bytes);
        }

        @Override
        public void launch(KernelFunction function, int gridX, int gridY, int gridZ, int blockX, int blockY,
                           int blockZ, int sharedMemoryBytes, Object... arguments) {
            work();
            host.launch(function, gridX, gridY, gridZ, blockX, blockY, blockZ, sharedMemoryBytes, arguments);
        }

        @Override
        public void enqueueHostTask(Runnable task) {
            work();
            host.enqueueHostTask(task);
        }

        @Override
        public void synchronize() {
            host.synchronize();
        }

        @Override
        public void close() {
            host.close();
        }

        @Override
        public String toString() {
            return "capture stream (" + host + ")";
        }
    }
}
