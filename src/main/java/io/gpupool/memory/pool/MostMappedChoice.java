package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;

/**
 * MAPPED growth's placement for a run that no fully mapped free block can serve ({@link MappedGrowth#place}):
 * the free block whose first {@code units} units have the most mapped units, so the fewest bytes need mapping.
 *
 * <pre>
 *   run of 4 units; free blocks (# mapped, . not):   A |##..|    B |#...|##..|    C |....|
 *   mapped units among the first 4:                  A 2         B 1               C 0  -&gt; A
 * </pre>
 * <ol>
 *   <li>Every order that holds the run, every free key: read racily (no order lock), skip blocks outside
 *       address space or that cannot serve the run; count the mapped units of the first {@code units}
 *       under the chunk's bitmap monitor.</li>
 *   <li>Keep the best so far: more mapped units, on a tie the lowest key; with a stream given, only
 *       blocks whose first {@code units} units would not make it wait on another stream's fence.</li>
 *   <li>Take the winner under its order lock if it is still free (else -1: the caller falls back).</li>
 * </ol>
 */
final class MostMappedChoice {

    private MostMappedChoice() {
    }

    /** @return the run's handle, or -1 when no block with a mapped unit was found or the winner was taken meanwhile */
    static long take(GlobalLevel global, int units, AllocationStream clearFor) {
        BuddyLevel buddy = global.buddy;
        long bestKey = -1;
        int bestOrder = -1;
        long bestMapped = 0;
        for (int j = BuddyLevel.ceilLog2(units); j <= buddy.topOrder(); j++) {
            int n = buddy.freeSlotsUnlocked(j);
            for (int i = 0; i < n; i++) {
                long key = buddy.freeKeyUnlocked(j, i);
                Chunk chunk = key < 0 ? null : global.chunks.get(Handles.keyChunk(key));
                if (chunk == null || !chunk.isAddressSpace() || !buddy.servesRun(chunk, units)) {
                    continue;
                }
                long offset = Handles.keyOffset(key);
                long mapped;
                synchronized (chunk.mapped) {
                    mapped = chunk.countMapped(offset, offset + units);
                }
                boolean better = mapped > bestMapped || (mapped == bestMapped && mapped > 0 && key < bestKey);
                if (better && clearFor != null && chunk.fencesBlock(offset, units, clearFor)) {
                    continue;                                       // asked only for blocks it need not wait for
                }
                if (better) {
                    bestKey = key;
                    bestOrder = j;
                    bestMapped = mapped;
                }
            }
        }
        return bestKey < 0 ? -1 : buddy.take(bestOrder, bestKey, units);
    }
}
