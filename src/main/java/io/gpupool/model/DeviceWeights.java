package io.gpupool.model;

import io.gpupool.backend.DeviceStream;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.model.safetensors.SafetensorsFile;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A model's weights on its device, FP32 (or bf16 where {@link #uploadBf16} is used), one block per tensor from the
 * weight allocator.
 *
 * <p>Loading stages each tensor in host memory, converted to FP32, and enqueues its upload; the
 * staging memory is freed after the stream is synchronised (every {@link #STAGING_LIMIT} bytes and
 * at {@link #finish()}). If anything fails, {@link #close()} releases every block uploaded so far, so
 * a bad model never stays half-loaded.
 */
public final class DeviceWeights implements AutoCloseable {

    /** Host staging bytes after which uploads are drained, bounding host memory while loading. */
    static final long STAGING_LIMIT = 64L << 20;

    private final DeviceStream stream;
    private final DeviceAllocator allocator;
    private final Map<String, DeviceBlock> blocks = new LinkedHashMap<>();
    private Arena staging = Arena.ofShared();
    private long staged;
    private long totalBytes;
    private boolean closed;

    public DeviceWeights(DeviceStream stream, DeviceAllocator allocator) {
        this.stream = stream;
        this.allocator = allocator;
    }

    /** Uploads the concatenation of {@code parts} (read from {@code file} as FP32) under {@code name}. */
    public long upload(String name, SafetensorsFile file, String... parts) {
        long bytes = 0;
        for (String part : parts) {
            bytes += file.info(part).elementCount() * Float.BYTES;
        }
        MemorySegment host = staging.allocate(bytes, 64);
        long offset = 0;
        for (String part : parts) {
            long partBytes = file.info(part).elementCount() * Float.BYTES;
            file.readFp32(part, host.asSlice(offset, partBytes));
            offset += partBytes;
        }
        return upload(name, host);
    }

    /**
     * Uploads the concatenation of {@code parts} as bf16 (read as FP32, rounded to nearest even) under {@code name}:
     * the weights of linear layers whose activations are held in bf16.
     */
    public long uploadBf16(String name, SafetensorsFile file, String... parts) {
        long count = 0;
        for (String part : parts) {
            count += file.info(part).elementCount();
        }
        MemorySegment host = staging.allocate(count * 2, 64);
        long offset = 0;
        try (Arena wide = Arena.ofConfined()) {
            for (String part : parts) {
                long partCount = file.info(part).elementCount();
                MemorySegment fp32 = wide.allocate(partCount * Float.BYTES, 64);
                file.readFp32(part, fp32);
                for (long i = 0; i < partCount; i++) {
                    host.setAtIndex(ValueLayout.JAVA_SHORT, offset + i,
                            Bf16.fromFloat(fp32.getAtIndex(ValueLayout.JAVA_FLOAT, i)));
                }
                offset += partCount;
            }
        }
        return upload(name, host);
    }

    /** Uploads {@code host} (FP32 values staged by the caller; must stay valid until {@link #finish()}). */
    public long upload(String name, MemorySegment host) {
        if (blocks.containsKey(name)) {
            throw new IllegalArgumentException("weight '" + name + "' uploaded twice");
        }
        long bytes = host.byteSize();
        DeviceBlock block = allocator.allocate(bytes, stream);
        blocks.put(name, block);
        totalBytes += block.size();
        stream.copyHostToDevice(host, block.address(), bytes);
        staged += Math.max(bytes, 1);
        if (staged >= STAGING_LIMIT) {
            drain();
        }
        return block.address();
    }

    /** A staging buffer for weights computed on the host; valid until the next drain. */
    public MemorySegment stage(long bytes) {
        return staging.allocate(bytes, 64);
    }

    private void drain() {
        stream.synchronize();
        staging.close();
        staging = Arena.ofShared();
        staged = 0;
    }

    /** Waits for every upload and frees the staging memory. */
    public void finish() {
        drain();
    }

    /** Device address of weight {@code name}. */
    public long address(String name) {
        DeviceBlock block = blocks.get(name);
        if (block == null) {
            throw new IllegalArgumentException("no weight named '" + name + "'");
        }
        return block.address();
    }

    /** Bytes reserved on the device for these weights. */
    public long totalBytes() {
        return totalBytes;
    }

    public int count() {
        return blocks.size();
    }

    /** Releases every block (after letting pending uploads finish); idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        RuntimeException failure = null;
        if (staged > 0) {
            try {
                stream.synchronize(); // uploads still reading staging memory
            } catch (RuntimeException e) {
                failure = e;
            }
        }
        List<DeviceBlock> toRelease = new ArrayList<>(blocks.values());
        blocks.clear();
        for (DeviceBlock block : toRelease) {
            try {
                block.release();
            } catch (RuntimeException e) {
                if (failure == null) {
                    failure = e;
                } else {
                    failure.addSuppressed(e);
                }
            }
        }
        staging.close();
        if (failure != null) {
            throw failure;
        }
    }
}
