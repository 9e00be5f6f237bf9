package io.gpupool.memory;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class DeviceBlockTest {

    private final AtomicInteger frees = new AtomicInteger();
    private final DeviceBlock.Owner owner = block -> frees.incrementAndGet();

    private DeviceBlock block() {
        return new DeviceBlock(owner, 0x1000, 512, 500, null, 7, null);
    }

    @Test
    void holdersReleasingOnManyThreadsAtOnceFreeTheBlockExactlyOnce() throws Exception {
        int holders = 8;
        for (int round = 0; round < 200; round++) {
            DeviceBlock block = block();
            for (int i = 1; i < holders; i++) {
                block.retain();
            }
            assertThat(block.refCount()).isEqualTo(holders);
            CyclicBarrier start = new CyclicBarrier(holders);
            AtomicInteger freedByCall = new AtomicInteger();
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < holders; i++) {
                threads.add(Thread.ofPlatform().start(() -> {
                    try {
                        start.await();
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                    if (block.release()) {
                        freedByCall.incrementAndGet();
                    }
                }));
            }
            for (Thread thread : threads) {
                thread.join();
            }
            assertThat(freedByCall.get()).as("releases that reported freeing, round " + round).isEqualTo(1);
            assertThat(block.refCount()).isZero();
        }
        assertThat(frees.get()).isEqualTo(200);
    }

    @Test
    void aFreedBlockRefusesRetainAndReleaseAndIsNotFreedTwice() {
        DeviceBlock block = block();
        assertThat(block.refCount()).isEqualTo(1);
        assertThat(block.release()).isTrue();
        assertThatThrownBy(block::retain).isInstanceOf(IllegalStateException.class).hasMessageContaining("0x1000");
        assertThatThrownBy(block::release).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("double release").hasMessageContaining("0x1000");
        assertThat(frees.get()).isEqualTo(1);
        assertThat(block.refCount()).isZero();
    }
}
