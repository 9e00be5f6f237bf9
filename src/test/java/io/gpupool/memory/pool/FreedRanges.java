package io.gpupool.memory.pool;

import io.gpupool.memory.DeviceBlock;

import java.util.Map;
import java.util.TreeMap;

/**
 * What the cross-stream tests check: the free memory each stream's work last used, by address range,
 * with the number of that work item ({@link ModelStream}). A block handed to a stream must come after
 * the last work of every other stream on any of its bytes; the ranges it covers are then forgotten
 * (its own work orders later users after theirs). The ranges never overlap.
 */
final class FreedRanges {

    private record Use(long end, ModelStream stream, long item) {
    }

    private final TreeMap<Long, Use> ranges = new TreeMap<>();

    /** {@code block} was freed after work item {@code item} of {@code stream} used it. */
    void freed(DeviceBlock block, ModelStream stream, long item) {
        ranges.put(block.address(), new Use(block.address() + block.size(), stream, item));
    }

    /** Fails when {@code block}, just handed to {@code taker}, could still be used by another stream's work. */
    void taken(DeviceBlock block, ModelStream taker) {
        long start = block.address();
        long end = start + block.size();
        Map.Entry<Long, Use> below = ranges.lowerEntry(start);
        if (below != null && below.getValue().end() > start) {          // split off the part before the block
            Use use = below.getValue();
            ranges.put(below.getKey(), new Use(start, use.stream(), use.item()));
            ranges.put(start, use);
        }
        Use tail = null;
        for (var it = ranges.subMap(start, end).entrySet().iterator(); it.hasNext(); ) {
            var entry = it.next();
            Use use = entry.getValue();
            if (!use.stream().orderedAfter(use.item(), taker)) {
                throw new AssertionError("stream " + taker.ordinal() + " got 0x" + Long.toHexString(start)
                        + " while item " + use.item() + " of stream " + use.stream().ordinal()
                        + " may still use 0x" + Long.toHexString(entry.getKey()));
            }
            it.remove();
            if (use.end() > end) {
                tail = use;
            }
        }
        if (tail != null) {                                             // keep the part after the block
            ranges.put(end, tail);
        }
    }
}
