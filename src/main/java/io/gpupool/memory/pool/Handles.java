package io.gpupool.memory.pool;

/**
 * The packed {@code long} that names a block of the pool: what a {@link io.gpupool.memory.DeviceBlock}
 * carries, what a stream's local cache stores and what the global level's free lists hold as keys.
 * Only bit arithmetic, so the hot path allocates nothing but the block.
 *
 * <h2>Bit layout</h2>
 * <pre>
 *    63 62 61                     40 39                    16 15             0
 *   | 0  0 |  chunk id (22 bits)    |  offset in units (24)  | length (16)     |  buddy run or span
 *   | 0  1 |  slab id (30 bits)            | object index (24)    | class (8)  |  small object
 *   | 1  0 |  0 ...                                     0 | chunk id (22)     |  dedicated chunk
 *
 *   free-list key (never handed out): | chunk id | offset in units (24) |    sorts by chunk, then offset
 * </pre>
 * A unit is the pool's minimum block. A span is a run longer than the maximum block (it never enters
 * a local cache); the 16-bit length bounds it at 2^16 - 1 units. Preconditions are the caller's:
 * ids, offsets and lengths must fit their fields, nothing is checked here.
 */
final class Handles {

    static final long KIND_MASK = 3L << 62;
    /** Kind of a buddy run or span: the kind bits are 0. */
    static final long KIND_RUN = 0;
    static final long KIND_SMALL = 1L << 62;
    static final long KIND_DEDICATED = 2L << 62;

    static final int CHUNK_SHIFT = 40;
    static final int OFFSET_SHIFT = 16;
    static final long OFFSET_MASK = (1L << 24) - 1;
    static final long LENGTH_MASK = (1L << 16) - 1;
    static final int MAX_CHUNKS = 1 << 22;
    static final long MAX_CHUNK_UNITS = 1L << 24;
    /** Free-list keys hold the chunk id above a 24-bit unit offset. */
    static final int KEY_CHUNK_SHIFT = 24;

    static final int SLAB_SHIFT = 32;
    static final int INDEX_SHIFT = 8;
    static final long INDEX_MASK = (1L << 24) - 1;
    static final int CLASS_MASK = 0xff;

    private Handles() {
    }

    static long kind(long handle) {
        return handle & KIND_MASK;
    }

    static long run(int chunkId, long offset, long length) {
        return ((long) chunkId << CHUNK_SHIFT) | (offset << OFFSET_SHIFT) | length;
    }

    static int chunkId(long handle) {
        return (int) (handle >>> CHUNK_SHIFT) & (MAX_CHUNKS - 1);
    }

    static long offset(long handle) {
        return (handle >>> OFFSET_SHIFT) & OFFSET_MASK;
    }

    static long length(long handle) {
        return handle & LENGTH_MASK;
    }

    static long small(int slabId, int index, int sizeClass) {
        return KIND_SMALL | ((long) slabId << SLAB_SHIFT) | ((long) index << INDEX_SHIFT) | sizeClass;
    }

    static int slabId(long handle) {
        return (int) ((handle & ~KIND_SMALL) >>> SLAB_SHIFT);
    }

    static long objectIndex(long handle) {
        return (handle >>> INDEX_SHIFT) & INDEX_MASK;
    }

    static int sizeClass(long handle) {
        return (int) handle & CLASS_MASK;
    }

    static long dedicated(int chunkId) {
        return KIND_DEDICATED | chunkId;
    }

    static int dedicatedChunkId(long handle) {
        return (int) (handle & (MAX_CHUNKS - 1));
    }

    static long key(int chunkId, long offset) {
        return ((long) chunkId << KEY_CHUNK_SHIFT) | offset;
    }

    /** The chunk id of a free-list key. */
    static int keyChunk(long key) {
        return (int) (key >>> KEY_CHUNK_SHIFT);
    }

    /** The unit offset of a free-list key within its chunk. */
    static long keyOffset(long key) {
        return key & OFFSET_MASK;
    }

    /**
     * Whether free block {@code key} starts where {@code previous} (of {@code step} units) ends, in the
     * same chunk; over sorted keys of one order this finds runs of adjacent blocks.
     */
    static boolean adjacent(long previous, long key, long step) {
        return key == previous + step && keyChunk(key) == keyChunk(previous);
    }
}
