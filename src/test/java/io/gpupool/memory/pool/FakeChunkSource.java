package io.gpupool.memory.pool;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.VirtualMemory;
import io.gpupool.memory.source.PhysicalAllocations;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A test-only {@link ChunkSource} over a fake address space: addresses are numbers handed out by a
 * bump pointer (never reused, 2 MiB aligned), so tests need no memory. It checks that every free
 * matches an allocation, can refuse (a limit on live bytes, or refuse everything), and records the
 * sizes it was asked for.
 */
final class FakeChunkSource implements ChunkSource, VirtualMemory {

    private static final long BASE = 1L << 40;

    private final long capacity;
    private final AtomicLong next = new AtomicLong(BASE);
    private final Map<Long, Long> live = new ConcurrentHashMap<>();
    private final AtomicLong liveBytes = new AtomicLong();
    private final List<Long> requests = java.util.Collections.synchronizedList(new ArrayList<>());
    final AtomicInteger frees = new AtomicInteger();
    /** Live bytes above which allocate refuses. */
    volatile long limit;
    /** With mapping: reserved ranges (base -> size) and the mapped 2 MiB granules; guarded by {@code ranges}. */
    private final boolean mapping;
    private final java.util.TreeMap<Long, Long> ranges = new java.util.TreeMap<>();
    private final java.util.Set<Long> mappedGranules = new java.util.HashSet<>();
    /** First granule of each extent larger than a granule -> its size; guarded by {@code ranges}. */
    private final java.util.TreeMap<Long, Long> extents = new java.util.TreeMap<>();

    /** Physical allocations (mapping only): the handles alive, and the calls made so far. */
    private final PhysicalAllocations physical = new PhysicalAllocations("fake");
    final AtomicInteger creates = new AtomicInteger();
    final AtomicInteger releases = new AtomicInteger();
    final AtomicInteger physicalMaps = new AtomicInteger();
    final AtomicInteger physicalUnmaps = new AtomicInteger();
    /** While set, map and mapPhysical count down {@link #mapEntered} and wait for this latch. */
    volatile java.util.concurrent.CountDownLatch blockMaps;
    volatile java.util.concurrent.CountDownLatch mapEntered = new java.util.concurrent.CountDownLatch(1);
    /** The next this-many mapPhysical calls fail with an out-of-memory exception. */
    final AtomicInteger failMaps = new AtomicInteger();

    FakeChunkSource(long capacity) {
        this(capacity, false);
    }

    /** A fake device that also reserves address space and maps 2 MiB granules (limit applies to mapped bytes). */
    FakeChunkSource(long capacity, boolean mapping) {
        this.capacity = capacity;
        this.limit = capacity;
        this.mapping = mapping;
    }

    @Override
    public Optional<VirtualMemory> virtualMemory() {
        return mapping ? Optional.of(this) : Optional.empty();
    }

    @Override
    public long granularity() {
        return 2 * PoolConfig.MIB;
    }

    @Override
    public long reserveAddressSpace(long bytes) {
        long address = next.getAndAdd(bytes + 2 * PoolConfig.MIB);
        synchronized (ranges) {
            ranges.put(address, bytes);
        }
        return address;
    }

    @Override
    public void releaseAddressSpace(long address, long bytes) {
        synchronized (ranges) {
            if (!Long.valueOf(bytes).equals(ranges.remove(address))) {
                throw new AssertionError("releaseAddressSpace(0x" + Long.toHexString(address) + ", " + bytes + ") matches no range");
            }
            for (long g = address; g < address + bytes; g += 2 * PoolConfig.MIB) {
                if (mappedGranules.contains(g)) {
                    throw new AssertionError("range 0x" + Long.toHexString(address) + " released with 0x"
                            + Long.toHexString(g) + " still mapped");
                }
            }
        }
    }

    @Override
    public void map(long address, long bytes) {
        pauseWhileBlocked();
        long now = liveBytes.addAndGet(bytes);
        if (now > limit) {
            liveBytes.addAndGet(-bytes);
            throw new OutOfDeviceMemoryException(bytes, "fake device refused to map " + bytes + " bytes");
        }
        synchronized (ranges) {
            var range = ranges.floorEntry(address);
            if (range == null || address + bytes > range.getKey() + range.getValue()) {
                throw new AssertionError("map(0x" + Long.toHexString(address) + ", " + bytes + ") outside reserved space");
            }
            for (long g = address; g < address + bytes; g += 2 * PoolConfig.MIB) {
                if (!mappedGranules.add(g)) {
                    throw new AssertionError("granule 0x" + Long.toHexString(g) + " mapped twice");
                }
            }
        }
    }

    @Override
    public void map(long address, long bytes, long extentBytes) {
        if (bytes % extentBytes != 0 || extentBytes % (2 * PoolConfig.MIB) != 0) {
            throw new AssertionError("map of " + bytes + " bytes in extents of " + extentBytes);
        }
        map(address, bytes);
        synchronized (ranges) {
            for (long a = address; a < address + bytes; a += extentBytes) {
                extents.put(a, extentBytes);
            }
        }
    }

    @Override
    public void unmap(long address, long bytes) {
        synchronized (ranges) {
            var before = extents.floorEntry(address);
            var last = extents.floorEntry(address + bytes - 1);
            if ((before != null && before.getKey() < address && before.getKey() + before.getValue() > address)
                    || (last != null && last.getKey() + last.getValue() > address + bytes)) {
                throw new AssertionError("unmap(0x" + Long.toHexString(address) + ", " + bytes + ") splits an extent");
            }
            extents.subMap(address, address + bytes).clear();
            for (long g = address; g < address + bytes; g += 2 * PoolConfig.MIB) {
                if (!mappedGranules.remove(g)) {
                    throw new AssertionError("unmap of granule 0x" + Long.toHexString(g) + " that is not mapped");
                }
            }
        }
        liveBytes.addAndGet(-bytes);
    }

    @Override
    public long createPhysical(long bytes) {
        if (bytes <= 0 || bytes % (2 * PoolConfig.MIB) != 0) {
            throw new AssertionError("createPhysical of " + bytes + " bytes, not a positive multiple of 2 MiB");
        }
        long now = liveBytes.addAndGet(bytes);
        if (now > limit) {
            liveBytes.addAndGet(-bytes);
            throw new OutOfDeviceMemoryException(bytes, "fake device refused to create " + bytes + " bytes");
        }
        creates.incrementAndGet();
        return physical.create(bytes);
    }

    @Override
    public void releasePhysical(long handle) {
        liveBytes.addAndGet(-physical.release(handle));
        releases.incrementAndGet();
    }

    /** Blocks while {@link #blockMaps} is set (as {@link #map} does); fails while {@link #failMaps} &gt; 0. */
    @Override
    public void mapPhysical(long address, long extentBytes, long[] handles, int count) {
        pauseWhileBlocked();
        if (failMaps.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
            throw new OutOfDeviceMemoryException(count * extentBytes, "fake device refused to map " + count
                    + " extents of " + extentBytes + " bytes");
        }
        long bytes = count * extentBytes;
        synchronized (ranges) {
            var range = ranges.floorEntry(address);
            if (range == null || address + bytes > range.getKey() + range.getValue()) {
                throw new AssertionError("mapPhysical(0x" + Long.toHexString(address) + ", " + bytes + ") outside reserved space");
            }
            physical.map(address, extentBytes, handles, count);
            for (long g = address; g < address + bytes; g += 2 * PoolConfig.MIB) {
                if (!mappedGranules.add(g)) {
                    throw new AssertionError("granule 0x" + Long.toHexString(g) + " mapped twice");
                }
            }
        }
        physicalMaps.incrementAndGet();
    }

    @Override
    public void unmapPhysical(long address, long extentBytes, long[] handles, int count) {
        synchronized (ranges) {
            physical.unmap(address, extentBytes, handles, count);
            for (long g = address; g < address + count * extentBytes; g += 2 * PoolConfig.MIB) {
                if (!mappedGranules.remove(g)) {
                    throw new AssertionError("unmap of granule 0x" + Long.toHexString(g) + " that is not mapped");
                }
            }
        }
        physicalUnmaps.incrementAndGet();
    }

    private void pauseWhileBlocked() {
        java.util.concurrent.CountDownLatch block = blockMaps;
        if (block != null) {
            mapEntered.countDown();
            try {
                block.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError(e);
            }
        }
    }

    /** Physical allocations created and not released. */
    int physicalHandles() {
        return physical.live();
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

    /** Mapped granules now (mapping only). */
    int mappedGranules() {
        synchronized (ranges) {
            return mappedGranules.size();
        }
    }

    /** Whether every granule of [address, address + bytes) is mapped now (mapping only). */
    boolean mapped(long address, long bytes) {
        synchronized (ranges) {
            for (long g = address & -(2 * PoolConfig.MIB); g < address + bytes; g += 2 * PoolConfig.MIB) {
                if (!mappedGranules.contains(g)) {
                    return false;
                }
            }
            return true;
        }
    }

    /** Reserved address ranges now (mapping only). */
    int addressRanges() {
        synchronized (ranges) {
            return ranges.size();
        }
    }

    /** True if [address, address + bytes) lies inside one live chunk, or (mapping) every granule of it is mapped. */
    boolean contains(long address, long bytes) {
        if (mapping) {
            synchronized (ranges) {
                boolean allMapped = true;
                for (long g = address & -(2 * PoolConfig.MIB); g < address + bytes; g += 2 * PoolConfig.MIB) {
                    allMapped &= mappedGranules.contains(g);
                }
                if (allMapped) {
                    return true;
                }
            }
        }
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
