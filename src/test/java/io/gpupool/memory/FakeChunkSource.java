package io.gpupool.memory;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A test-only {@link ChunkSource} over a fake address space: addresses are numbers handed out by a
 * bump pointer (never reused, 2 MiB aligned), so tests need no memory. It checks that every free
 * matches an allocation, can refuse (a limit on live bytes, or refuse everything), and records the
 * sizes it was asked for.
 */
final class FakeChunkSource implements ChunkSource {

    private static final long BASE = 1L << 40;

    private final long capacity;
    private final AtomicLong next = new AtomicLong(BASE);
    private final Map<Long, Long> live = new ConcurrentHashMap<>();
    private final AtomicLong liveBytes = new AtomicLong();
    private final List<Long> requests = java.util.Collections.synchronizedList(new ArrayList<>());
    final AtomicInteger frees = new AtomicInteger();
    /** Live bytes above which allocate refuses. */
    volatile long limit;

    FakeChunkSource(long capacity) {
        this.capacity = capacity;
        this.limit = capacity;
    }

    @Override
    public long allocate(long bytes) {
        if (bytes <= 0 || bytes % (2 * PoolConfig.MIB) != 0) {
            throw new AssertionError("pool asked for " + bytes + " bytes, not a positive multiple of 2 MiB");
        }
        requests.add(bytes);
        long now = liveBytes.addAndGet(bytes);
        if (now > limit) {
            liveBytes.addAndGet(-bytes);
            throw new OutOfDeviceMemoryException(bytes, "fake device refused " + bytes + " bytes (" + (now - bytes)
                    + " live, limit " + limit + ")");
        }
        long address = next.getAndAdd(bytes + 2 * PoolConfig.MIB);   // a gap so neighbours never touch
        live.put(address, bytes);
        return address;
    }

    @Override
    public void free(long address, long bytes) {
        Long size = live.remove(address);
        if (size == null || size != bytes) {
            throw new AssertionError("free(0x" + Long.toHexString(address) + ", " + bytes + ") matches no chunk ("
                    + size + ")");
        }
        liveBytes.addAndGet(-bytes);
        frees.incrementAndGet();
    }

    @Override
    public long capacityBytes() {
        return capacity;
    }

    @Override
    public String name() {
        return "fake";
    }

    long liveBytes() {
        return liveBytes.get();
    }

    int liveChunks() {
        return live.size();
    }

    /** True if [address, address + bytes) lies inside one live chunk. */
    boolean contains(long address, long bytes) {
        for (Map.Entry<Long, Long> e : live.entrySet()) {
            if (address >= e.getKey() && address + bytes <= e.getKey() + e.getValue()) {
                return true;
            }
        }
        return false;
    }

    List<Long> requests() {
        synchronized (requests) {
            return List.copyOf(requests);
        }
    }
}
