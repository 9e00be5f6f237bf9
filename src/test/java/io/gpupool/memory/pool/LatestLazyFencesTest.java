package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.StreamFence;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The shared lazy fences of one stream under frees from several threads at once (a request's thread and a
 * callback thread releasing blocks of the same stream): a free never gets a fence older than one an earlier
 * free already got. Were it otherwise, a unit could end up behind an event recorded before the stream's latest
 * work on it (see {@link LatestLazyFences}), and another stream would use the memory too early.
 */
class LatestLazyFencesTest {

    /** A stream that never synchronises; a recorded fence is complete at once (only the seal matters here). */
    private static final AllocationStream STREAM = new AllocationStream() {
        @Override public int ordinal() { return 0; }
        @Override public StreamFence recordFence() { return StreamFence.completed(); }
    };

    @Test
    void aFreeNeverGetsAnOlderFenceOfItsStreamThanAnEarlierFreeGot() throws Exception {
        AtomicLong open = new AtomicLong();
        LatestLazyFences fences = new LatestLazyFences(open);
        AtomicLong newestHandedOut = new AtomicLong();
        AtomicLong older = new AtomicLong();
        int threads = 4;
        CyclicBarrier start = new CyclicBarrier(threads);
        List<Thread> running = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            running.add(Thread.ofPlatform().start(() -> {
                try {
                    start.await();
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
                ThreadLocalRandom random = ThreadLocalRandom.current();
                FenceSet.Shared[] held = new FenceSet.Shared[8];   // units still holding fences keep them open
                for (int i = 0; i < 200_000; i++) {
                    long floor = newestHandedOut.get();          // handed out by frees that ended before this one
                    FenceSet.Shared fence = fences.fenceFor(STREAM, 0);
                    if (fence.sequence < floor) {
                        older.incrementAndGet();
                    }
                    newestHandedOut.accumulateAndGet(fence.sequence, Math::max);
                    if (random.nextInt(4) == 0) {
                        ((LazyFence) fence.fence).recordNow();    // another stream took memory under it: sealed
                    }
                    int slot = i % held.length;
                    if (held[slot] != null) {
                        held[slot].release();
                    }
                    held[slot] = fence;
                }
                for (FenceSet.Shared fence : held) {
                    if (fence != null) {
                        fence.release();
                    }
                }
            }));
        }
        for (Thread thread : running) {
            thread.join();
        }
        assertThat(older.get()).as("frees handed a fence older than an earlier free's").isZero();
        assertThat(open.get()).as("fences left open once every reference went, losers of a race included").isZero();
    }
}
