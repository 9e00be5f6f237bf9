package io.gpupool.memory.pool;

/**
 * Decides, with every order lock of the buddy level held, which free blocks
 * {@link BuddyLevel#takeFree} takes out of the lists (a reclaim: {@link ReclaimChoice}). Offers
 * come largest order first and, within an order, from the last key of {@link #arrange} down.
 */
interface FreeBlockChooser {

    /** Whether enough was taken (no further block is offered). */
    boolean satisfied();

    /** Reorders order {@code k}'s keys {@code keys[0, n)} so that the last one is the first offered. */
    void arrange(long[] keys, int n, int k);

    /** Whether free block {@code key} of order {@code k} leaves the lists. */
    boolean take(long key, int k);
}
