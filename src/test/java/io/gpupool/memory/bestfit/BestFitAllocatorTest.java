package io.gpupool.memory.bestfit;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.StreamFence;
import io.gpupool.replay.SimulatedChunkSource;
import io.gpupool.replay.StatisticsChunkSource;
import io.gpupool.replay.ReplayStream;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class BestFitAllocatorTest {

    private static final long KIB = 1L << 10;
    private static final long MIB = 1L << 20;
    private final ReplayStream s0 = new ReplayStream(0);
    private final StatisticsChunkSource source = new StatisticsChunkSource(new SimulatedChunkSource("dev", 1L << 34));

    @Test
    void takesTheSmallestHoleThatFitsNotTheFirst() {
        try (BestFitAllocator allocator = new BestFitAllocator(source, 16 * MIB, false)) {
            DeviceBlock a = allocator.allocate(MIB, s0);
            DeviceBlock big = allocator.allocate(4 * MIB, s0);   // hole of 4 MiB once freed
            DeviceBlock c = allocator.allocate(MIB, s0);
            DeviceBlock small = allocator.allocate(2 * MIB, s0); // hole of 2 MiB once freed
            DeviceBlock e = allocator.allocate(MIB, s0);
            long bigAddress = big.address();
            long smallAddress = small.address();
            big.release();
            small.release();
            DeviceBlock fit = allocator.allocate(2 * MIB - 1000, s0);
            assertThat(fit.address()).isEqualTo(smallAddress);
            DeviceBlock next = allocator.allocate(3 * MIB, s0);
            assertThat(next.address()).isEqualTo(bigAddress);
            for (DeviceBlock block : List.of(a, c, e, fit, next)) {
                block.release();
            }
        }
    }

    @Test
    void roundsTo256AndSplitsTheRest() {
        try (BestFitAllocator allocator = new BestFitAllocator(source, 2 * MIB, false)) {
            DeviceBlock a = allocator.allocate(1, s0);
            DeviceBlock b = allocator.allocate(300, s0);
            assertThat(a.size()).isEqualTo(256);
            assertThat(b.size()).isEqualTo(512);
            assertThat(b.address()).isEqualTo(a.address() + 256);
            assertThat(allocator.requestedBytes()).isEqualTo(301);
            assertThat(allocator.allocatedBytes()).isEqualTo(768);
            assertThat(allocator.freeBytes()).isEqualTo(2 * MIB - 768);
            a.release();
            b.release();
        }
    }

    @Test
    void freeingEverythingCoalescesEachChunkBackIntoOneSegment() {
        try (BestFitAllocator allocator = new BestFitAllocator(source, 8 * MIB, false)) {
            List<DeviceBlock> blocks = new ArrayList<>();
            for (int i = 0; i < 200; i++) {
                blocks.add(allocator.allocate(1 + (i * 7919L) % (300 * KIB), s0));
            }
            // free in an order that is neither address order nor its reverse
            for (int i = 0; i < blocks.size(); i += 2) {
                blocks.get(i).release();
            }
            assertThat(allocator.fragmentation()).isGreaterThan(0.0);
            for (int i = 1; i < blocks.size(); i += 2) {
                blocks.get(i).release();
            }
            assertThat(allocator.allocatedBytes()).isZero();
            assertThat(allocator.freeBytes()).isEqualTo(allocator.reservedBytes());
            long chunks = allocator.metrics().counters().grows();
            assertThat(allocator.trim()).isEqualTo(chunks * 8 * MIB); // every chunk was whole again
            assertThat(source.reservedBytes()).isZero();
        }
    }

    @Test
    void outOfMemoryGivesBackFreeChunksRetriesAndThenStatesTheNumbers() {
        SimulatedChunkSource limit = new SimulatedChunkSource("dev", 40 * MIB);
        try (BestFitAllocator allocator = new BestFitAllocator(limit, 16 * MIB, false)) {
            DeviceBlock a = allocator.allocate(10 * MIB, s0);
            DeviceBlock b = allocator.allocate(10 * MIB, s0); // second 16 MiB chunk
            b.release();                                       // that chunk is now wholly free
            DeviceBlock c = allocator.allocate(20 * MIB, s0);  // needs the freed chunk given back first
            assertThat(c.size()).isEqualTo(20 * MIB);
            assertThatThrownBy(() -> allocator.allocate(30 * MIB, s0))
                    .isInstanceOf(OutOfDeviceMemoryException.class)
                    .hasMessageContaining("31457280")               // requested
                    .hasMessageContaining("reserved 37748736")      // 16 MiB + 20 MiB
                    .hasMessageContaining("largest free segment 6291456")
                    .hasMessageContaining("fragmentation");
            assertThat(allocator.metrics().counters().failures()).isEqualTo(1);
            a.release();
            c.release();
        }
    }

    @Test
    void reuseByAnotherStreamWaitsOnTheFreeingStreamsFence() {
        RecordingStream producer = new RecordingStream(1);
        RecordingStream consumer = new RecordingStream(2);
        try (BestFitAllocator allocator = new BestFitAllocator(source, 2 * MIB, false)) {
            DeviceBlock a = allocator.allocate(MIB, producer);
            long address = a.address();
            a.release();
            DeviceBlock sameStream = allocator.allocate(MIB, producer);
            assertThat(sameStream.address()).isEqualTo(address);
            assertThat(producer.waitedOn).isZero(); // same stream: stream order suffices
            sameStream.release();
            DeviceBlock other = allocator.allocate(MIB, consumer);
            assertThat(other.address()).isEqualTo(address);
            assertThat(consumer.waitedOn).isEqualTo(1); // the consumer waits for the producer's work
            other.release();
        }
    }

    @Test
    void closeNamesOutstandingBlocksWithTheirAllocationSite() {
        BestFitAllocator allocator = new BestFitAllocator(source, 2 * MIB, true);
        allocator.allocate(12345, s0);
        assertThatThrownBy(allocator::close).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("1 outstanding").hasMessageContaining("12345 bytes")
                .hasMessageContaining("stream 0").hasMessageContaining("BestFitAllocatorTest");
        assertThat(source.reservedBytes()).isZero();
    }

    @Test
    void rejectsAChunkSizeThatIsNotAMultipleOf2MiB() {
        assertThatThrownBy(() -> new BestFitAllocator(source, 3 * MIB + 1, false))
                .hasMessageContaining("chunkBytes").hasMessageContaining("3145729");
    }

    /** A stream whose fences stay pending, counting how often another stream was made to wait. */
    private static final class RecordingStream implements AllocationStream {
        final int ordinal;
        int waitedOn;

        RecordingStream(int ordinal) {
            this.ordinal = ordinal;
        }

        @Override
        public int ordinal() {
            return ordinal;
        }

        @Override
        public StreamFence recordFence() {
            return new StreamFence() {
                @Override
                public boolean isComplete() {
                    return false;
                }

                @Override
                public void makeWait(AllocationStream stream) {
                    ((RecordingStream) stream).waitedOn++;
                }

                @Override
                public void await() {
                }

                @Override
                public void close() {
                }
            };
        }
    }
}
