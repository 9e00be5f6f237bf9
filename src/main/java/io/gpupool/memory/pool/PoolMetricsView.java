package io.gpupool.memory.pool;

import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.metric.AllocatorCounters;
import io.gpupool.memory.metric.BlockLayoutMetric;
import io.gpupool.memory.metric.ChunkMetric;
import io.gpupool.memory.metric.FreeOrderMetric;
import io.gpupool.memory.metric.LatencyDistribution;
import io.gpupool.memory.metric.PoolMetrics;
import io.gpupool.memory.metric.SizeClassMetric;
import io.gpupool.memory.metric.StreamCacheMetric;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;

/**
 * The pool's read-only metrics: every getter reads counters, adders and racy copies, never a lock
 * an allocation needs (see {@link PoolStatistics} for where each number lives).
 */
final class PoolMetricsView implements PoolMetrics, BlockLayoutMetric {

    private final StreamLevel streams;
    private final GlobalLevel global;
    private final Growth growth;
    private final Reservation reservation;
    private final PoolStatistics stats;
    private final Supplier<PoolConfig> config;

    PoolMetricsView(StreamLevel streams, GlobalLevel global, Growth growth, Reservation reservation,
                    PoolStatistics stats, Supplier<PoolConfig> config) {
        this.streams = streams;
        this.global = global;
        this.growth = growth;
        this.reservation = reservation;
        this.stats = stats;
        this.config = config;
    }

    /** The buddy map for operators; see {@link BlockLayouts} (no lock taken, a racy picture). */
    @Override
    public List<ChunkBlocks> layout() {
        return BlockLayouts.layout(global.chunks.all(), global.buddy, streams.caches(), global.small,
                global.smallCount, global.unitShift);
    }

    @Override
    public String name() {
        return reservation.source().name();
    }

    @Override
    public AllocatorMode mode() {
        return config.get().mode();
    }

    @Override
    public long reservedBytes() {
        return reservation.reserved();
    }

    @Override
    public long allocatedBytes() {
        return stats.allocatedBytes();
    }

    @Override
    public long requestedBytes() {
        return stats.requestedBytes();
    }

    @Override
    public long peakReservedBytes() {
        return reservation.peak();
    }

    @Override
    public long peakAllocatedBytes() {
        return stats.peakAllocatedNow();
    }

    @Override
    public long peakRequestedBytes() {
        return stats.peakRequestedNow();
    }

    @Override
    public void resetPeaks() {
        reservation.resetPeak();
        stats.resetPeak();
    }

    @Override
    public AllocatorCounters counters() {
        long localHits = streams.sum(LocalCache.HITS);
        return new AllocatorCounters(localHits + stats.global.sum(GlobalCounters.ALLOCATIONS),
                streams.sum(LocalCache.FREES) + stats.global.sum(GlobalCounters.FREES),
                localHits, stats.global.sum(GlobalCounters.HITS), stats.grows.sum(), stats.trims.sum(),
                global.buddy.coalesces.sum(), stats.recoveries.sum(), stats.failures.sum());
    }

    @Override
    public LatencyDistribution allocationLatency() {
        return stats.latency;
    }

    @Override
    public long cachedBytes() {
        return streams.sum(LocalCache.CACHED_BYTES);
    }

    @Override
    public long addressSpaceBytes() {
        return growth.addressSpaceBytes();
    }

    @Override
    public long mapCalls() {
        return stats.maps.sum();
    }

    @Override
    public long unmapCalls() {
        return stats.unmaps.sum();
    }

    @Override
    public long retainedHandles() {
        return growth.retainedHandles();
    }

    @Override
    public long retainedHandleBytes() {
        return growth.retainedHandleBytes();
    }

    @Override
    public long physicalCreates() {
        return growth.physicalCreates();
    }

    @Override
    public long physicalReleases() {
        return growth.physicalReleases();
    }

    @Override
    public long mapNanos() {
        return stats.mapNanos.sum();
    }

    @Override
    public long unmapNanos() {
        return stats.unmapNanos.sum();
    }

    @Override
    public long crossStreamWaits() {
        return global.crossStreamWaits.sum() + global.small.crossStreamWaits.sum();
    }

    @Override
    public long localCacheCapBytes() {
        PoolConfig cfg = config.get();
        return cfg.mode() == AllocatorMode.TWO_LEVEL ? streams.capBytes(cfg) : 0;
    }

    @Override
    public List<StreamCacheMetric> streams() {
        List<StreamCacheMetric> result = new ArrayList<>();
        for (LocalCache cache : streams.caches()) {
            if (cache != null) {
                result.add(new StreamCacheMetric(cache.ordinal, cache.stat(LocalCache.CACHED_BYTES),
                        cache.stat(LocalCache.CACHED_BLOCKS), cache.stat(LocalCache.HITS),
                        cache.stat(LocalCache.MISSES)));
            }
        }
        return result;
    }

    @Override
    public List<FreeOrderMetric> freeBlocks() {
        List<FreeOrderMetric> result = new ArrayList<>();
        for (int k = 0; k <= global.buddy.topOrder(); k++) {
            result.add(new FreeOrderMetric(k, global.minBlock << k, global.buddy.freeBlocks(k)));
        }
        return result;
    }

    /** Free bytes of the global level; under MAPPED growth only the mapped ones (free address space costs nothing). */
    @Override
    public long globalFreeBytes() {
        return growth.globalFreeBytes();
    }

    @Override
    public long fencedFreeBytes() {
        return global.fencedFreeUnits() << global.unitShift;
    }

    /**
     * The largest contiguous free range of the global level: adjacent free blocks of the top order
     * in one chunk count as one range (they are never merged into a larger block, yet serve a
     * dedicated-size request of the chunk's space just as well as one block would). Racy copy of
     * the top-order list, no lock taken.
     */
    @Override
    public long largestFreeBlockBytes() {
        BuddyLevel buddy = global.buddy;
        int top = buddy.topOrder();
        if (buddy.freeBlocks(top) > 0) {
            long[] keys = buddy.freeKeysUnlocked(top);
            Arrays.sort(keys);
            long step = 1L << top;
            long longest = 0;
            long run = 0;
            for (int i = 0; i < keys.length; i++) {
                run = i > 0 && Handles.adjacent(keys[i - 1], keys[i], step) ? run + 1 : 1;
                longest = Math.max(longest, run);
            }
            return Math.max(1, longest) * (global.minBlock << top);
        }
        for (int k = top; k >= 0; k--) {
            if (buddy.freeBlocks(k) > 0) {
                return global.minBlock << k;
            }
        }
        return 0;
    }

    @Override
    public List<SizeClassMetric> smallClasses() {
        return global.small.metrics(global.minBlock);
    }

    @Override
    public List<ChunkMetric> chunks() {
        List<ChunkMetric> result = new ArrayList<>();
        int unitShift = global.unitShift;
        for (Chunk chunk : global.chunks.all()) {
            long live = Math.max(0, Math.min(chunk.units, chunk.liveUnits.get()));
            if (chunk.isAddressSpace()) {                          // what it costs: its mapped units
                long mappedUnits;
                synchronized (chunk.mapped) {
                    mappedUnits = chunk.mappedUnits;
                }
                result.add(new ChunkMetric(chunk.address, mappedUnits << unitShift,
                        Math.max(0, mappedUnits - live) << unitShift, false));
                continue;
            }
            result.add(new ChunkMetric(chunk.address, chunk.bytes,
                    chunk.dedicated ? (chunk.idleDedicated ? chunk.bytes : 0) : chunk.bytes - (live << unitShift),
                    chunk.dedicated));
        }
        return result;
    }
}
