package io.gpupool.memory.pool;

import java.util.ArrayList;
import java.util.List;

import io.gpupool.memory.metric.BlockLayoutMetric.Block;
import io.gpupool.memory.metric.BlockLayoutMetric.BlockState;
import io.gpupool.memory.metric.BlockLayoutMetric.ChunkBlocks;

/**
 * Builds the operators' buddy map of a {@link DevicePool}: every chunk as a sequence of leaf blocks
 * with a state, from what the pool's structures hold, without taking any lock.
 *
 * <h2>Steps</h2>
 * <pre>
 *   state[u] for each minimum block u of a buddy chunk, initially ALLOCATED
 *   1. free lists:    each key (chunk, offset) of order k    -> units [o, o + 2^k) FREE, one block each
 *   2. local caches:  each cached run (chunk, offset, n)     -> units [o, o + n)   CACHED
 *   3. slabs:         each slab's run (chunk, offset, n)     -> units [o, o + n)   SPLIT
 *   4. emit: free blocks exactly as listed (so buddies that deferred coalescing has not merged yet
 *      show as two); every other maximal run of one state as the largest aligned power-of-two
 *      blocks that fit (a trimmed 10-unit allocation shows as 8 + 2 units)
 * </pre>
 * Allocated runs are not recorded anywhere, so they are what is left; two neighbouring allocations
 * may show as one block. Reads race with allocations: a layout may mix two moments and is a picture
 * for people, never an input to a decision. Cost O(units + free blocks) per call.
 */
final class BlockLayouts {

    private static final byte ALLOCATED = 0;
    private static final byte FREE = 1;
    private static final byte CACHED = 2;
    private static final byte SPLIT = 3;
    private static final BlockState[] STATES = {BlockState.ALLOCATED, BlockState.FREE, BlockState.CACHED,
            BlockState.SPLIT};

    private BlockLayouts() {
    }

    static List<ChunkBlocks> layout(List<Chunk> chunks, BuddyLevel buddy, LocalCache[] caches, SmallObjects small,
                                    int firstRunClass, int unitShift) {
        int highestId = -1;
        for (Chunk chunk : chunks) {
            highestId = Math.max(highestId, chunk.id);
        }
        int maxId = highestId;
        byte[][] states = new byte[maxId + 1][];
        int[][] freeOrder = new int[maxId + 1][];     // order + 1 of a free block starting at u, 0 = none
        for (Chunk chunk : chunks) {
            if (!chunk.dedicated) {
                states[chunk.id] = new byte[(int) chunk.units];
                freeOrder[chunk.id] = new int[(int) chunk.units];
            }
        }
        for (int k = 0; k <= buddy.topOrder(); k++) {                                     // step 1
            for (long key : buddy.freeKeysUnlocked(k)) {
                int id = Handles.keyChunk(key);
                int offset = (int) Handles.keyOffset(key);
                if (id <= maxId && states[id] != null && offset + (1 << k) <= states[id].length) {
                    mark(states[id], offset, 1 << k, FREE);
                    freeOrder[id][offset] = k + 1;
                }
            }
        }
        for (LocalCache cache : caches) {                                                   // step 2
            if (cache != null) {
                cache.forEachCachedRun(firstRunClass, h -> markRun(states, maxId, h, CACHED));
            }
        }
        small.forEachSlabRun(h -> markRun(states, maxId, h, SPLIT));                      // step 3

        List<ChunkBlocks> result = new ArrayList<>(chunks.size());
        for (Chunk chunk : chunks) {                                                        // step 4
            List<Block> blocks = new ArrayList<>();
            if (chunk.dedicated) {
                blocks.add(new Block(0, chunk.bytes, BlockState.ALLOCATED));
            } else {
                emit(states[chunk.id], freeOrder[chunk.id], buddy.topOrder(), unitShift, blocks);
            }
            result.add(new ChunkBlocks(chunk.address, chunk.bytes, chunk.dedicated, blocks));
        }
        return result;
    }

    private static void markRun(byte[][] states, int maxId, long handle, byte state) {
        if ((handle & Handles.KIND_MASK) != 0) {
            return;                                    // a small object: its slab shows as SPLIT
        }
        int id = Handles.chunkId(handle);
        if (id <= maxId && states[id] != null) {
            long offset = Handles.offset(handle);
            long length = Handles.length(handle);
            if (offset + length <= states[id].length) {
                mark(states[id], (int) offset, (int) length, state);
            }
        }
    }

    private static void mark(byte[] states, int from, int length, byte state) {
        for (int u = from; u < from + length; u++) {
            states[u] = state;
        }
    }

    private static void emit(byte[] states, int[] freeOrder, int top, int unitShift, List<Block> out) {
        int u = 0;
        while (u < states.length) {
            int units = freeOrder[u] > 0 ? 1 << (freeOrder[u] - 1) : 0;
            if (units > 0 && allFree(states, u, units)) {
                out.add(new Block((long) u << unitShift, (long) units << unitShift, BlockState.FREE));
                u += units;
                continue;
            }
            byte state = settled(states[u]);
            int end = u + 1;
            while (end < states.length && freeOrder[end] == 0 && settled(states[end]) == state) {
                end++;
            }
            while (u < end) {                                          // largest aligned blocks that fit
                int order = u == 0 ? top : Math.min(Integer.numberOfTrailingZeros(u), top);
                while ((1 << order) > end - u) {
                    order--;
                }
                out.add(new Block((long) u << unitShift, (long) (1 << order) << unitShift, STATES[state]));
                u += 1 << order;
            }
        }
    }

    /** A free unit outside every listed free block was caught in flux by the racy read: show it as in use. */
    private static byte settled(byte state) {
        return state == FREE ? ALLOCATED : state;
    }

    private static boolean allFree(byte[] states, int from, int units) {
        for (int u = from; u < from + units && u < states.length; u++) {
            if (states[u] != FREE) {
                return false;
            }
        }
        return true;
    }
}
