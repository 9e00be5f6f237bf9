package io.gpupool.serving.fake;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.KernelFunction;
import io.gpupool.backend.KernelModule;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.StreamFence;

import java.lang.foreign.MemorySegment;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;

/** A device whose streams do nothing (models under test compute on the host). Counts open streams. */
public final class FakeDevice implements ComputeDevice {

    private final int index;
    public final AtomicInteger openStreams = new AtomicInteger();

    public FakeDevice(int index) {
        this.index = index;
    }

    @Override
    public int index() {
        return index;
    }

    @Override
    public String name() {
        return "fake" + index;
    }

    @Override
    public long totalMemory() {
        return 1L << 30;
    }

    @Override
    public long freeMemory() {
        return 1L << 30;
    }

    @Override
    public ChunkSource chunkSource() {
        throw new UnsupportedOperationException("fake device has no chunk source");
    }

    @Override
    public Optional<DeviceAllocator> nativeAllocator(AllocatorMode mode) {
        return Optional.empty();
    }

    @Override
    public DeviceStream createStream(int ordinal) {
        openStreams.incrementAndGet();
        return new Stream(ordinal);
    }

    @Override
    public KernelModule loadModule(String name, byte[] image) {
        throw new UnsupportedOperationException();
    }

    @Override
    public void bindToCurrentThread() {
    }

    private final class Stream implements DeviceStream {
        private final int ordinal;

        Stream(int ordinal) {
            this.ordinal = ordinal;
        }

        @Override
        public int ordinal() {
            return ordinal;
        }

        @Override
        public StreamFence recordFence() {
            return StreamFence.completed();                    // the fake runs everything at once
        }

        @Override
        public ComputeDevice device() {
            return FakeDevice.this;
        }

        @Override
        public void copyHostToDevice(MemorySegment source, long deviceAddress, long bytes) {
        }

        @Override
        public void copyDeviceToHost(long deviceAddress, MemorySegment destination, long bytes) {
        }

        @Override
        public void copyDeviceToDevice(long sourceAddress, long destinationAddress, long bytes) {
        }

        @Override
        public void fill(long deviceAddress, byte value, long bytes) {
        }

        @Override
        public void launch(KernelFunction function, int gridX, int gridY, int gridZ, int blockX, int blockY, int blockZ,
                           int sharedMemoryBytes, Object... arguments) {
        }

        @Override
        public void enqueueHostTask(Runnable task) {
            task.run();
        }

        @Override
        public void synchronize() {
        }

        @Override
        public void close() {
            openStreams.decrementAndGet();
        }
    }
}
