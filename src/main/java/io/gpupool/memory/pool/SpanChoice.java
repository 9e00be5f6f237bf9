package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;

import java.util.Arrays;
import java.util.function.BooleanSupplier;

/**
 * Which run of adjacent free top-order blocks a span (a request above the maximum block) takes when
 * several could serve it: the one whose memory costs the least to use.
 *
 * <h2>Why</h2>
 * The buddy level alone takes the lowest adjacent run ({@link BuddyLevel#allocateSpan}). Under
 * MAPPED growth that may be never-mapped address space while a span of the same size that the stream
 * freed a moment ago lies mapped further up: the pool maps a fresh span, and the freed one, still
 * under the stream's fence, can be neither unmapped nor given to another stream without a wait.
 * A layer-by-layer model frees and asks for spans of one size again and again, so the choice decides
 * whether a large request's memory is reused or doubled (docs/benchmarks.md, "Request-end fences").
 *
 * <pre>
 *   top-order blocks of one address-space chunk (# mapped, . not; A* = A's pending fence)
 *   | .... | .... | #A*# | #A*# |      a span of 2 blocks for A: [2, 4) (8 units mapped, no wait)
 *    lowest run ^^^^^^^                                   rather than [0, 2) (8 units to map)
 * </pre>
 *
 * <h2>Steps</h2>
 * <ol>
 *   <li>Coalesce every order (top-order blocks appear only by merging), then copy the top-order
 *       list without its lock and sort it.</li>
 *   <li>For each run of {@code m = ceil(units / 2^top)} adjacent free blocks of a chunk that serves
 *       spans: skip it if its first {@code units} units would make the stream wait on another
 *       stream's work (unless {@link io.gpupool.memory.PoolConfig#waitBeyondBudget()}: a wait beats a
 *       map there); count its mapped units (all of them in a chunk that is memory throughout). The
 *       most mapped wins, on a tie the one without a wait, then the lowest key.</li>
 *   <li>Take it ({@link BuddyLevel#allocateSpan(int, long)}); gone meanwhile, or no candidate: -1,
 *       and the placement goes on with the lowest run (which may make the stream wait).</li>
 * </ol>
 * Spans are rare and large (a map of one costs far more than this scan), so the scan's cost does not matter.
 */
final class SpanChoice {

    private final GlobalLevel global;
    /** Whether a wait on another stream's work beats a map ({@link io.gpupool.memory.PoolConfig#waitBeyondBudget()}). */
    private final BooleanSupplier waitOverMap;

    SpanChoice(GlobalLevel global, BooleanSupplier waitOverMap) {
        this.global = global;
        this.waitOverMap = waitOverMap;
    }

    /** A span of {@code units} (more than the maximum block) for {@code stream}, or -1. */
    long allocate(int units, AllocationStream stream) {
        BuddyLevel buddy = global.buddy;
        int top = buddy.topOrder();
        buddy.coalesceAll();                                       // step 1
        long[] keys = buddy.freeKeysUnlocked(top);
        Arrays.sort(keys);
        long step = 1L << top;
        int blocks = (int) ((units + step - 1) >>> top);
        long best = -1;
        long bestMapped = -1;
        int run = 0;
        for (int i = 0; i < keys.length; i++) {                   // step 2
            Chunk chunk = global.chunks.get(Handles.keyChunk(keys[i]));
            if (chunk == null || !buddy.servesRun(chunk, units)) {
                run = 0;
                continue;
            }
            run = run > 0 && Handles.adjacent(keys[i - 1], keys[i], step) ? run + 1 : 1;
            if (run < blocks) {
                continue;
            }
            long first = keys[i - blocks + 1];
            long offset = Handles.keyOffset(first);
            if (offset + units > chunk.units) {
                continue;
            }
            boolean waits = chunk.fencesBlock(offset, units, stream);
            if (waits && !waitOverMap.getAsBoolean()) {
                continue;
            }
            long mapped = units;
            if (chunk.isAddressSpace()) {
                synchronized (chunk.mapped) {
                    mapped = chunk.countMapped(offset, offset + units);
                }
            }
            mapped = 2 * mapped + (waits ? 0 : 1);                 // ties: the one with no wait
            if (mapped > bestMapped) {
                best = first;
                bestMapped = mapped;
            }
        }
        return best < 0 ? -1 : buddy.allocateSpan(units, best);    // step 3
    }
}
