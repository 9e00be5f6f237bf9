package io.gpupool.backend.cuda;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The fence-event recycler with fake handles: no driver, runs in CI. */
class EventRecyclerTest {

    /** Fake driver: numbered handles, remembers which are alive, can be told to fail destroys. */
    private static final class FakeEvents implements EventRecycler.Events<Integer> {
        final AtomicInteger next = new AtomicInteger();
        final Set<Integer> alive = ConcurrentHashMap.newKeySet();
        final AtomicInteger destroys = new AtomicInteger();
        volatile int failDestroyOf = -1;

        @Override
        public Integer create() {
            int handle = next.incrementAndGet();
            alive.add(handle);
            return handle;
        }

        @Override
        public void destroy(Integer event) {
            destroys.incrementAndGet();
            assertThat(alive.remove(event)).as("event %d destroyed twice or never created", event).isTrue();
            if (event == failDestroyOf) {
                throw new IllegalStateException("destroy of " + event + " failed");
            }
        }
    }

    private final FakeEvents driver = new FakeEvents();

    @Test
    void steadyStateReusesOneEventWithoutDriverCalls() {
        EventRecycler<Integer> recycler = new EventRecycler<>(driver, 4, "stream 0");
        Integer first = recycler.acquire();
        recycler.release(first);
        for (int i = 0; i < 1000; i++) {
            Integer event = recycler.acquire();
            assertThat(event).isEqualTo(first);
            recycler.release(event);
        }
        assertThat(recycler.created()).isEqualTo(1);
        assertThat(recycler.reused()).isEqualTo(1000);
        assertThat(driver.destroys.get()).isZero();
    }

    @Test
    void heldEventsAreNeverHandedOutTwice() {
        EventRecycler<Integer> recycler = new EventRecycler<>(driver, 8, "stream 0");
        List<Integer> held = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            held.add(recycler.acquire());
        }
        recycler.release(held.remove(2));
        recycler.release(held.remove(0));
        held.add(recycler.acquire());
        held.add(recycler.acquire());
        held.add(recycler.acquire());
        assertThat(new HashSet<>(held)).as("distinct handles among held events").hasSize(held.size());
        assertThat(recycler.created()).isEqualTo(6);
        assertThat(recycler.reused()).isEqualTo(2);
    }

    @Test
    void keepsAtMostCapacityIdleEventsAndDestroysTheRest() {
        EventRecycler<Integer> recycler = new EventRecycler<>(driver, 3, "stream 0");
        List<Integer> held = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            held.add(recycler.acquire());
        }
        held.forEach(recycler::release);
        assertThat(recycler.spare()).isEqualTo(3);
        assertThat(driver.alive).hasSize(3);
        assertThat(recycler.destroyed()).isEqualTo(7);
    }

    @Test
    void capacityZeroCreatesAndDestroysEveryTime() {
        EventRecycler<Integer> recycler = new EventRecycler<>(driver, 0, "stream 0");
        for (int i = 0; i < 5; i++) {
            recycler.release(recycler.acquire());
        }
        assertThat(recycler.created()).isEqualTo(5);
        assertThat(recycler.destroyed()).isEqualTo(5);
        assertThat(driver.alive).isEmpty();
    }

    @Test
    void closeDestroysSparesAndLaterReleasesDestroyTheirEvent() {
        EventRecycler<Integer> recycler = new EventRecycler<>(driver, 4, "cuda:0 stream 2");
        Integer spare1 = recycler.acquire();
        Integer spare2 = recycler.acquire();
        Integer heldByOpenFence = recycler.acquire();
        recycler.release(spare1);
        recycler.release(spare2);
        recycler.close();
        assertThat(driver.alive).containsExactly(heldByOpenFence);
        recycler.release(heldByOpenFence); // the fence is closed after its stream
        assertThat(driver.alive).isEmpty();
        recycler.close(); // idempotent: nothing destroyed twice
        assertThat(driver.destroys.get()).isEqualTo(3);
        assertThatThrownBy(recycler::acquire).isInstanceOf(IllegalStateException.class)
                .hasMessage("cuda:0 stream 2 is closed");
    }

    @Test
    void closeDestroysEverySpareEvenWhenOneDestroyFails() {
        EventRecycler<Integer> recycler = new EventRecycler<>(driver, 4, "stream 0");
        Integer a = recycler.acquire();
        Integer b = recycler.acquire();
        Integer c = recycler.acquire();
        recycler.release(a);
        recycler.release(b);
        recycler.release(c);
        driver.failDestroyOf = b;
        assertThatThrownBy(recycler::close).hasMessage("destroy of " + b + " failed");
        assertThat(driver.alive).isEmpty();
    }

    @Test
    void rejectsNegativeCapacity() {
        assertThatThrownBy(() -> new EventRecycler<>(driver, -1, "stream 0"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("-1");
    }

    @Test
    void concurrentReleasesFromOtherThreadsLoseNoEvent() throws Exception {
        // the stream's thread acquires; fences are closed on other streams' threads
        EventRecycler<Integer> recycler = new EventRecycler<>(driver, 16, "stream 0");
        int threads = 4;
        int perThread = 20_000;
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> workers = new ArrayList<>();
        Set<Integer> inUse = ConcurrentHashMap.newKeySet();
        AtomicInteger doubleUse = new AtomicInteger();
        for (int t = 0; t < threads; t++) {
            workers.add(Thread.ofPlatform().start(() -> {
                try {
                    start.await();
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
                for (int i = 0; i < perThread; i++) {
                    Integer event = recycler.acquire();
                    if (!inUse.add(event)) {
                        doubleUse.incrementAndGet();
                    }
                    inUse.remove(event);
                    recycler.release(event);
                }
            }));
        }
        start.countDown();
        for (Thread worker : workers) {
            worker.join();
        }
        assertThat(doubleUse.get()).as("an event handed to two holders at once").isZero();
        assertThat(recycler.created() + recycler.reused()).isEqualTo((long) threads * perThread);
        assertThat(driver.alive).hasSize(recycler.spare());
        assertThat(recycler.created()).isLessThanOrEqualTo(threads);
        recycler.close();
        assertThat(driver.alive).isEmpty();
    }
}
