package io.gpupool.memory.pool;

import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.metric.AllocatorCounters;
import io.gpupool.memory.metric.PoolMetrics;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BiConsumer;

import static io.gpupool.memory.pool.Reservation.format;

/**
 * The report of blocks still outstanding when the pool closes.
 *
 * <pre>
 *   trackAllocationSites on:   every block in a concurrent set; each line names size, requested bytes,
 *                              stream, address and the first frame outside the pool (the caller)
 *   trackAllocationSites off:  no registry; a scan of the structures (local caches already flushed):
 *     small objects      taken bits of each slab's bitmap
 *     buddy runs         the gaps between free blocks and slabs of each chunk (neighbours show as one)
 *     dedicated chunks   whole, unless idle in the cache
 * </pre>
 * Tracking is fixed at construction: it costs a set insertion and a stack trace per allocation.
 */
final class OutstandingBlocks {

    /** Lines listed by a scan at most. */
    private static final int SCAN_LIMIT = 32;

    private final boolean tracking;
    private final Set<DeviceBlock> tracked = ConcurrentHashMap.newKeySet();
    /** Frames of these classes are the pool's own; the first other frame is the allocation site. */
    private final Set<String> poolFrames;

    OutstandingBlocks(boolean tracking, Set<String> poolFrames) {
        this.tracking = tracking;
        this.poolFrames = poolFrames;
    }

    boolean tracking() {
        return tracking;
    }

    /** The allocation site to store in a new block, or null without tracking. */
    Throwable site() {
        return tracking ? new Throwable("allocation site") : null;
    }

    void added(DeviceBlock block) {
        if (tracking) {
            tracked.add(block);
        }
    }

    void removed(DeviceBlock block) {
        if (tracking) {
            tracked.remove(block);
        }
    }

    /** The report, or null when nothing is outstanding; caches must be flushed already. */
    String describe(String poolName, PoolMetrics metrics, GlobalLevel global) {
        AllocatorCounters counters = metrics.counters();
        long blocks = counters.allocations() - counters.frees();
        if (blocks == 0) {
            return null;
        }
        StringBuilder text = new StringBuilder().append("pool on ").append(poolName).append(" closed with ")
                .append(blocks).append(" block(s) outstanding, ").append(format(metrics.allocatedBytes()))
                .append(" (requested ").append(format(metrics.requestedBytes())).append(")");
        if (tracked.isEmpty()) {
            text.append("; stream unknown (set trackAllocationSites to record stream and allocation site):");
            describeByScan(text, global);
        }
        for (DeviceBlock block : tracked) {
            text.append("\n  ").append(block.size()).append(" B (").append(format(block.size())).append(", requested ")
                    .append(block.requestedBytes()).append(" B) on stream ").append(block.stream().ordinal())
                    .append(" at 0x").append(Long.toHexString(block.address()));
            if (block.allocationSite() != null) {
                for (StackTraceElement frame : block.allocationSite().getStackTrace()) {
                    if (!isPoolFrame(frame.getClassName())) {
                        text.append("\n      allocated at ").append(frame);
                        break;
                    }
                }
            }
        }
        return text.toString();
    }

    private boolean isPoolFrame(String className) {
        int nested = className.indexOf('$');
        return poolFrames.contains(nested < 0 ? className : className.substring(0, nested));
    }

    private static void describeByScan(StringBuilder text, GlobalLevel global) {
        int[] listed = {0};
        BiConsumer<Long, Long> line = (address, size) -> {
            if (listed[0]++ < SCAN_LIMIT) {
                text.append("\n  ").append(size).append(" B (").append(format(size)).append(") at 0x")
                        .append(Long.toHexString(address));
            }
        };
        Map<Integer, List<long[]>> busy = new HashMap<>();
        global.small.forEachTaken(line, run -> busy.computeIfAbsent(Handles.chunkId(run), id -> new ArrayList<>())
                .add(new long[] {Handles.offset(run), Handles.length(run)}));
        long[][] free = global.buddy.snapshotFree();
        for (int k = 0; k < free.length; k++) {
            for (long key : free[k]) {
                busy.computeIfAbsent(Handles.keyChunk(key), id -> new ArrayList<>())
                        .add(new long[] {Handles.keyOffset(key), 1L << k});
            }
        }
        int unitShift = global.unitShift;
        for (Chunk chunk : global.chunks.all()) {
            if (chunk.dedicated) {
                if (!chunk.idleDedicated) {
                    line.accept(chunk.address, chunk.bytes);
                }
                continue;
            }
            List<long[]> covered = busy.getOrDefault(chunk.id, new ArrayList<>());
            covered.sort(Comparator.comparingLong(r -> r[0]));
            long position = 0;
            for (long[] range : covered) {
                if (range[0] > position) {
                    line.accept(chunk.address + (position << unitShift), (range[0] - position) << unitShift);
                }
                position = Math.max(position, range[0] + range[1]);
            }
            if (position < chunk.units) {
                line.accept(chunk.address + (position << unitShift), (chunk.units - position) << unitShift);
            }
        }
        if (listed[0] > SCAN_LIMIT) {
            text.append("\n  ... and ").append(listed[0] - SCAN_LIMIT).append(" more");
        }
    }
}
