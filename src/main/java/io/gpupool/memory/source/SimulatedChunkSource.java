package io.gpupool.memory.source;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.OutOfDeviceMemoryException;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A {@link ChunkSource} that hands out address ranges with no memory behind them.
 *
 * <p>For trace replay, fragmentation studies and benchmarks of the pool's bookkeeping: the
 * allocators never touch the memory they manage, so a made-up address space measures them exactly,
 * without a device and without the cost of real allocations. Never give its addresses to code that
 * reads or writes memory.
 *
 * <pre>
 *   BASE = 2^40                next (bump pointer, only grows)
 *   |-- chunk --|-- chunk --|--...--|----------------------------------&gt;
 * </pre>
 * Addresses are 2 MiB aligned and never reused, so chunks never overlap even across free and
 * reallocate. The capacity is enforced like a device's memory (fetch-add, roll back on refusal);
 * {@link #free} checks that the address and size match a live chunk and fails loudly otherwise.
 */
public final class SimulatedChunkSource implements ChunkSource {

    private static final long BASE = 1L << 40;
    private static final long ALIGNMENT = 2L << 20;

    private final String name;
    private final long capacityBytes;
    private final AtomicLong next = new AtomicLong(BASE);
    private final AtomicLong reserved = new AtomicLong();
    private final ConcurrentHashMap<Long, Long> live = new ConcurrentHashMap<>();

    public SimulatedChunkSource(String name, long capacityBytes) {
        if (capacityBytes <= 0) {
            throw new IllegalArgumentException("capacityBytes must be positive, got " + capacityBytes);
        }
        this.name = name;
        this.capacityBytes = capacityBytes;
    }

    @Override
    public long allocate(long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("chunk size must be positive, got " + bytes);
        }
        long after = reserved.addAndGet(bytes);
        if (after > capacityBytes || after < 0) {
            reserved.addAndGet(-bytes);
            throw new OutOfDeviceMemoryException(bytes, name + " cannot provide " + bytes + " bytes: "
                    + (after - bytes) + " of " + capacityBytes + " reserved");
        }
        long span = (bytes + ALIGNMENT - 1) & -ALIGNMENT;
        long address = next.getAndAdd(span);
        live.put(address, bytes);
        return address;
    }

    @Override
    public void free(long address, long bytes) {
        Long size = live.get(address);
        if (size == null) {
            throw new IllegalArgumentException(name + ": free of 0x" + Long.toHexString(address)
                    + " which is not a live chunk");
        }
        if (size != bytes) {
            throw new IllegalArgumentException(name + ": free of 0x" + Long.toHexString(address) + " with "
                    + bytes + " bytes, but the chunk has " + size);
        }
        if (live.remove(address, size)) {
            reserved.addAndGet(-bytes);
        } else {
            throw new IllegalArgumentException(name + ": concurrent double free of 0x" + Long.toHexString(address));
        }
    }

    @Override
    public long capacityBytes() {
        return capacityBytes;
    }

    @Override
    public String name() {
        return name;
    }

    /** Bytes in live chunks. */
    public long reservedBytes() {
        return reserved.get();
    }

    /** Number of live chunks. */
    public int liveChunks() {
        return live.size();
    }
}
