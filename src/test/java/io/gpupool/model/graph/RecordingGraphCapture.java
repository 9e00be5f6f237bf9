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
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

/**
 * A capturing backend for the host, where kernels are host tasks: the capture stream records each
 * task (and fill, device copy) instead of running it, and a graph's launch enqueues them all on the
 * launching stream. It obeys the {@link GraphCapture} contract (copies reported, not recorded, and only
 * before / after the device work) so the cache and replay logic can be tested without a GPU. Counts
 * graphs alive, and can be told to refuse the next capture at end.
 */
final class RecordingGraphCapture implements GraphCapture {

    private final ComputeDevice device;
    final AtomicInteger liveGraphs = new AtomicInteger();
    final AtomicInteger begun = new AtomicInteger();
    volatile boolean failNextEnd;
    /** The next launch of any graph throws. */
    volatile boolean failNextLaunch;
    private Recording recording;
    private boolean closed;

    RecordingGraphCapture(ComputeDevice device) {
        this.device = device;
        this.stream = device.createStream(98);
    }

    /** The facility's own stream (warm-up runs go here), a plain host stream. */
    private final DeviceStream stream;

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
        recording = new Recording(device, copies);
        return recording;
    }

    @Override
    public synchronized DeviceGraph end() {
        Recording done = recording;
        recording = null;
        if (done == null) {
            throw new IllegalStateException("no capture in progress");
        }
        if (failNextEnd) {
            failNextEnd = false;
            throw new GraphCaptureException("refused by the test");
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

        Recording(ComputeDevice device, CopyListener copies) {
            this.device = device;
            this.copies = copies;
        }

        private void record(Consumer<DeviceStream> step) {
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
}
