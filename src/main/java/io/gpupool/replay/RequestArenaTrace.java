package io.gpupool.replay;

import io.gpupool.memory.trace.Trace;
import io.gpupool.model.plan.LifetimePacking;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A trace rewritten as the server allocates with request arenas ({@code gpupool.serving.request-arena}): each
 * request's allocations become one allocation of its arena, made at the request's first event and freed at its
 * last, sized by {@link LifetimePacking} over the request's own allocations.
 *
 * <pre>
 *   stream 3, per tensor:   A(x0) A(q) A(k) F(q) ... F(x11) F(ids)      live bytes 0 -&gt; ... -&gt; 0
 *   stream 3, arena:        A(arena)                  ...  F(arena)     arena = packed [A, F) lifetimes
 *                           ^ the request's first event       ^ its last
 * </pre>
 * A request is a stream's events from its live bytes leaving 0 to their return to 0 (the rule of
 * {@link FenceTiming.RequestEnd}); with that fence timing the arena's free, the request's last event, completes
 * at once, as a release after the request's synchronise does. Events of other streams keep their places, events
 * without a stream and the allocations of a request still open at the end of the trace are copied unchanged.
 */
final class RequestArenaTrace {

    /** Arenas get pointers of their own, above any a trace records, so they never collide with one. */
    private static final long ARENA_POINTERS = 1L << 62;

    private RequestArenaTrace() {
    }

    /** Whether {@code pointer} is one of the arenas this rewrite made (not an event copied unchanged). */
    static boolean isArena(long pointer) {
        return pointer >= ARENA_POINTERS;
    }

    /** One request's events while it is open: its allocations by pointer, their lifetimes in event indices. */
    private static final class Open {
        final int first;
        final List<Integer> events = new ArrayList<>();
        final Map<Long, Integer> byPointer = new HashMap<>();
        final List<long[]> allocations = new ArrayList<>();      // {bytes, from, to}
        long live;

        Open(int first) {
            this.first = first;
        }
    }

    static Trace of(Trace trace) {
        int n = trace.size();
        long[] arenaAt = new long[n];          // > 0: the request starting at this event takes an arena of these bytes
        long[] freeAt = new long[n];           // > 0: the request ending at this event frees its arena of these bytes
        long[] pointerAt = new long[n];
        boolean[] dropped = new boolean[n];
        Map<Integer, Open> open = new HashMap<>();
        long arenas = 0;
        for (int i = 0; i < n; i++) {
            int stream = trace.stream(i);
            byte action = trace.action(i);
            if (stream == Trace.NO_STREAM || action == Trace.ALLOCATE_FAILURE) {
                continue;
            }
            Open request = open.get(stream);
            if (action == Trace.ALLOCATE) {
                if (request == null) {
                    request = new Open(i);
                    open.put(stream, request);
                }
                request.byPointer.put(trace.pointer(i), request.allocations.size());
                request.allocations.add(new long[]{trace.bytes(i), request.events.size(), Long.MAX_VALUE});
                request.live += trace.bytes(i);
            } else {
                Integer allocation = request == null ? null : request.byPointer.remove(trace.pointer(i));
                if (allocation == null) {
                    continue;                   // not allocated in this stream's open request: copied unchanged
                }
                request.allocations.get(allocation)[2] = request.events.size();
                request.live -= trace.bytes(i);
            }
            request.events.add(i);
            if (request.live == 0 && request.byPointer.isEmpty()) {
                long bytes = pack(request.allocations);
                arenaAt[request.first] = bytes;
                pointerAt[request.first] = ARENA_POINTERS + (arenas << 8);
                freeAt[i] = bytes;
                pointerAt[i] = ARENA_POINTERS + (arenas++ << 8);
                for (int e : request.events) {
                    dropped[e] = true;
                }
                open.remove(stream);
            }
        }
        Trace out = new Trace(n / 8 + 16);
        for (int i = 0; i < n; i++) {
            if (arenaAt[i] > 0) {
                out.add(trace.thread(i), trace.timeNanos(i), Trace.ALLOCATE, pointerAt[i], arenaAt[i], trace.stream(i));
            }
            if (freeAt[i] > 0) {
                out.add(trace.thread(i), trace.timeNanos(i), Trace.FREE, pointerAt[i], freeAt[i], trace.stream(i));
            }
            if (!dropped[i]) {
                out.add(trace.thread(i), trace.timeNanos(i), trace.action(i), trace.pointer(i), trace.bytes(i),
                        trace.stream(i));
            }
        }
        return out;
    }

    private static long pack(List<long[]> allocations) {
        int k = allocations.size();
        long[] sizes = new long[k];
        int[] from = new int[k];
        int[] to = new int[k];
        for (int a = 0; a < k; a++) {
            sizes[a] = allocations.get(a)[0];
            from[a] = (int) allocations.get(a)[1];
            to[a] = (int) allocations.get(a)[2];
        }
        return LifetimePacking.pack(sizes, from, to).blockBytes();
    }
}
