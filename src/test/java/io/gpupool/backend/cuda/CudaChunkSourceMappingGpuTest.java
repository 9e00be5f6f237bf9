package io.gpupool.backend.cuda;

import io.gpupool.memory.OutOfDeviceMemoryException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The mapping half of the CUDA chunk source on a real GPU: data through mapped memory, partial unmaps, OOM, errors. */
@Tag("gpu")
class CudaChunkSourceMappingGpuTest {

    private static final long MIB = 1L << 20;

    private CudaBackend backend;
    private CudaDevice device;
    private CudaChunkSource source;
    private CudaStream stream;
    private Arena arena;

    @BeforeEach
    void open() {
        backend = CudaTestSupport.backendOrSkip(CudaBackend.Options.defaults());
        device = (CudaDevice) backend.devices().getFirst();
        source = device.plainChunkSource();
        stream = device.createStream(0);
        arena = Arena.ofShared();
    }

    @AfterEach
    void close() {
        if (stream != null) {
            stream.close();
        }
        if (arena != null) {
            arena.close();
        }
        if (backend != null) {
            backend.close();
        }
    }

    @Test
    void hopperMapsIn2MiBGranules() {
        assertThat(source.virtualMemory()).contains(source);
        assertThat(source.granularity()).isEqualTo(2 * MIB);
    }

    @Test
    void memoryMappedInPiecesHoldsWhatTheDeviceWrote() {
        long base = source.reserveAddressSpace(64 * MIB);
        source.map(base, 8 * MIB);
        source.map(base + 8 * MIB, 24 * MIB);
        source.map(base + 32 * MIB, 32 * MIB);
        assertThat(source.mappedBytes()).isEqualTo(64 * MIB);

        stream.fill(base, (byte) 0x11, 8 * MIB);
        stream.fill(base + 8 * MIB, (byte) 0x22, 24 * MIB);
        stream.fill(base + 32 * MIB, (byte) 0x33, 32 * MIB);
        MemorySegment host = readBack(base, 64 * MIB);
        assertBytes(host, 0, 8 * MIB, (byte) 0x11);
        assertBytes(host, 8 * MIB, 32 * MIB, (byte) 0x22);
        assertBytes(host, 32 * MIB, 64 * MIB, (byte) 0x33);

        source.unmap(base, 64 * MIB);   // one unmap over three earlier map calls
        assertThat(source.mappedBytes()).isZero();
        source.releaseAddressSpace(base, 64 * MIB);
    }

    @Test
    void extentsHoldDataUnmapWholeAndRefuseASplit() {
        long base = source.reserveAddressSpace(128 * MIB);
        source.map(base, 64 * MIB, 32 * MIB);                 // two physical allocations of 32 MiB
        source.map(base + 64 * MIB, 8 * MIB, 4 * MIB);
        assertThat(source.mappedBytes()).isEqualTo(72 * MIB);
        stream.fill(base, (byte) 0x44, 72 * MIB);
        MemorySegment host = readBack(base, 72 * MIB);
        assertBytes(host, 0, 72 * MIB, (byte) 0x44);

        assertThatThrownBy(() -> source.unmap(base + 2 * MIB, 30 * MIB))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("would split the extent");
        assertThat(source.mappedBytes()).as("a refused unmap changes nothing").isEqualTo(72 * MIB);
        source.unmap(base + 32 * MIB, 36 * MIB);               // one 32 MiB extent and one 4 MiB extent
        assertThat(source.mappedBytes()).isEqualTo(36 * MIB);
        source.map(base + 32 * MIB, 32 * MIB, 32 * MIB);
        stream.fill(base + 32 * MIB, (byte) 0x55, 32 * MIB);
        MemorySegment again = readBack(base, 64 * MIB);
        assertBytes(again, 0, 32 * MIB, (byte) 0x44);
        assertBytes(again, 32 * MIB, 64 * MIB, (byte) 0x55);
        source.unmap(base, 64 * MIB);
        source.unmap(base + 68 * MIB, 4 * MIB);
        assertThat(source.mappedBytes()).isZero();
        source.releaseAddressSpace(base, 128 * MIB);
    }

    @Test
    void aPhysicalAllocationUnmappedAndMappedElsewhereHoldsTheDevicesWritesWithoutANewCreate() {
        long base = source.reserveAddressSpace(256 * MIB);
        long[] handles = {source.createPhysical(32 * MIB), source.createPhysical(32 * MIB)};
        source.mapPhysical(base, 32 * MIB, handles, 2);
        assertThat(source.mappedBytes()).isEqualTo(64 * MIB);
        stream.fill(base, (byte) 0x66, 64 * MIB);
        assertBytes(readBack(base, 64 * MIB), 0, 64 * MIB, (byte) 0x66);

        long[] out = new long[2];
        source.unmapPhysical(base, 32 * MIB, out, 2);
        assertThat(out).as("the same allocations, still alive").containsExactly(handles);
        assertThat(source.mappedBytes()).isZero();
        source.mapPhysical(base + 128 * MIB, 32 * MIB, new long[] {out[1], out[0]}, 2);   // elsewhere, swapped
        stream.fill(base + 128 * MIB, (byte) 0x77, 64 * MIB);
        assertBytes(readBack(base + 128 * MIB, 64 * MIB), 0, 64 * MIB, (byte) 0x77);
        assertThatThrownBy(() -> source.unmapPhysical(base + 128 * MIB, 2 * MIB, new long[1], 1))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("does not start a mapped extent");
        assertThatThrownBy(() -> source.mapPhysical(base + 128 * MIB, 32 * MIB, new long[] {out[0]}, 1))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("is mapped or being mapped");

        source.unmapPhysical(base + 128 * MIB, 32 * MIB, out, 2);
        source.releasePhysical(out[0]);
        source.releasePhysical(out[1]);
        source.releaseAddressSpace(base, 256 * MIB);
        assertThat(source.mappedBytes()).isZero();
    }

    @ParameterizedTest(name = "one cuMemUnmap over the range and cuMemSetAccess per granule: {0}")
    @ValueSource(booleans = {true, false})
    void middleOfAnEarlierMapCanBeUnmappedAndMappedAgain(boolean otherDriverCallPattern) {
        source.unmapWholeRange = otherDriverCallPattern;
        source.accessPerGranule = otherDriverCallPattern;
        long base = source.reserveAddressSpace(64 * MIB);
        source.map(base, 64 * MIB);
        stream.fill(base, (byte) 0x5a, 64 * MIB);
        stream.synchronize();

        source.unmap(base + 16 * MIB, 8 * MIB);
        assertThat(source.mappedBytes()).isEqualTo(56 * MIB);
        source.map(base + 16 * MIB, 8 * MIB);
        stream.fill(base + 16 * MIB, (byte) 0x7e, 8 * MIB);

        MemorySegment host = readBack(base, 64 * MIB);
        assertBytes(host, 0, 16 * MIB, (byte) 0x5a);
        assertBytes(host, 16 * MIB, 24 * MIB, (byte) 0x7e);
        assertBytes(host, 24 * MIB, 64 * MIB, (byte) 0x5a);

        source.unmap(base, 16 * MIB);
        source.unmap(base + 16 * MIB, 48 * MIB);
        source.releaseAddressSpace(base, 64 * MIB);
        assertThat(source.mappedBytes()).isZero();
    }

    @Test
    void unmapGivesTheMemoryBackToTheDevice() {
        long before = device.freeMemory();
        long base = source.reserveAddressSpace(512 * MIB);
        source.map(base, 512 * MIB);
        assertThat(device.freeMemory()).isLessThanOrEqualTo(before - 512 * MIB);
        source.unmap(base, 512 * MIB);
        source.releaseAddressSpace(base, 512 * MIB);
        assertThat(device.freeMemory()).isGreaterThanOrEqualTo(before - 4 * MIB);
    }

    @Test
    void mappingMoreThanTheDeviceHasFailsWithOutOfMemoryAndMapsNothing() {
        long granule = source.granularity();
        long bytes = (2 * device.totalMemory() + granule - 1) / granule * granule;
        long base = source.reserveAddressSpace(bytes);
        source.map(base, granule);
        long freeBefore = device.freeMemory();

        assertThatThrownBy(() -> source.map(base + granule, bytes - granule))
                .isInstanceOf(OutOfDeviceMemoryException.class)
                .hasMessageContaining("cuda:0")
                .hasMessageContaining("cuMemCreate")
                .hasMessageContaining("CUDA_ERROR_OUT_OF_MEMORY");

        assertThat(source.mappedBytes()).isEqualTo(granule);
        assertThat(device.freeMemory()).isGreaterThanOrEqualTo(freeBefore - 4 * MIB);
        // the rolled-back granules are free to map again
        source.map(base + granule, 64 * MIB);
        stream.fill(base + granule, (byte) 1, 64 * MIB);
        assertBytes(readBack(base + granule, 64 * MIB), 0, 64 * MIB, (byte) 1);
        source.unmap(base, granule + 64 * MIB);
        source.releaseAddressSpace(base, bytes);
    }

    @Test
    void misuseIsRejectedWithAMessageNamingTheProblem() {
        long base = source.reserveAddressSpace(16 * MIB);
        assertThatThrownBy(() -> source.reserveAddressSpace(3 * MIB))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("multiples of 2097152 bytes, got 3145728");
        assertThatThrownBy(() -> source.map(base + 4096, 2 * MIB))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("must be positive multiples of 2097152");
        assertThatThrownBy(() -> source.map(base + 8 * MIB, 16 * MIB))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not inside one reserved range");
        source.map(base, 4 * MIB);
        assertThatThrownBy(() -> source.map(base + 2 * MIB, 4 * MIB))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("granule at 0x" + Long.toHexString(base + 2 * MIB) + " is already mapped");
        assertThat(source.mappedBytes()).as("a rejected map changes nothing").isEqualTo(4 * MIB);
        assertThatThrownBy(() -> source.unmap(base, 6 * MIB))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("granule at 0x" + Long.toHexString(base + 4 * MIB) + " is not mapped");
        assertThatThrownBy(() -> source.releaseAddressSpace(base, 16 * MIB))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("2 granules of 2097152 bytes are still mapped");
        assertThatThrownBy(() -> source.releaseAddressSpace(base, 8 * MIB))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("(it has 16777216 bytes)");
        source.unmap(base, 4 * MIB);
        source.releaseAddressSpace(base, 16 * MIB);
        assertThatThrownBy(() -> source.map(base, 2 * MIB))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not inside one reserved range");
    }

    @Test
    void threadsMappingDisjointRangesOfOneReservationKeepTheTableConsistent() throws Exception {
        int threads = 8;
        long slice = 8 * MIB;
        long base = source.reserveAddressSpace(threads * slice);
        try (ExecutorService pool = Executors.newFixedThreadPool(threads)) {
            List<Future<?>> futures = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                long at = base + t * slice;
                futures.add(pool.submit(() -> {
                    for (int round = 0; round < 40; round++) {
                        source.map(at, slice);
                        source.unmap(at + 2 * MIB, 2 * MIB);
                        source.map(at + 2 * MIB, 2 * MIB);
                        source.unmap(at, slice);
                    }
                    source.map(at, slice);
                }));
            }
            for (Future<?> future : futures) {
                future.get();
            }
        }
        assertThat(source.mappedBytes()).isEqualTo(threads * slice);
        stream.fill(base, (byte) 9, threads * slice);
        assertBytes(readBack(base, threads * slice), 0, threads * slice, (byte) 9);
        source.unmap(base, threads * slice);
        source.releaseAddressSpace(base, threads * slice);
    }

    private MemorySegment readBack(long address, long bytes) {
        MemorySegment host = arena.allocate(bytes, 8);
        stream.copyDeviceToHost(address, host, bytes);
        stream.synchronize();
        return host;
    }

    /** Every 8-byte word in [from, to) of {@code host} is {@code value} repeated. */
    private static void assertBytes(MemorySegment host, long from, long to, byte value) {
        long word = (value & 0xffL) * 0x0101010101010101L;
        for (long offset = from; offset < to; offset += 8) {
            long actual = host.get(ValueLayout.JAVA_LONG_UNALIGNED, offset);
            if (actual != word) {
                throw new AssertionError("byte word at offset " + offset + " is 0x" + Long.toHexString(actual)
                        + ", expected 0x" + Long.toHexString(word));
            }
        }
    }
}
