package io.gpupool.backend.host;

import io.gpupool.memory.OutOfDeviceMemoryException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledOnOs;
import org.junit.jupiter.api.condition.OS;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The host chunk source's address-space mapping (mmap / mprotect / madvise), on Linux. */
@EnabledOnOs(OS.LINUX)
class HostChunkSourceMappingTest {

    private static final long MIB = 1L << 20;

    private final HostChunkSource source = new HostChunkSource(64 * MIB);

    @Test
    void mappedMemoryHoldsDataAndUnmappedMemoryComesBackEmpty() {
        assertThat(source.virtualMemory()).contains(source);
        long base = source.reserveAddressSpace(1024 * MIB);          // far above the budget: costs nothing
        assertThat(base % (2 * MIB)).isZero();
        source.map(base + 4 * MIB, 8 * MIB);
        MemorySegment memory = MemorySegment.ofAddress(base + 4 * MIB).reinterpret(8 * MIB);
        memory.fill((byte) 0x5a);
        assertThat(memory.get(ValueLayout.JAVA_BYTE, 8 * MIB - 1)).isEqualTo((byte) 0x5a);
        assertThat(source.mappedBytes()).isEqualTo(8 * MIB);

        source.unmap(base + 6 * MIB, 2 * MIB);                       // the middle of the earlier map
        assertThat(source.mappedBytes()).isEqualTo(6 * MIB);
        source.map(base + 6 * MIB, 2 * MIB);
        assertThat(MemorySegment.ofAddress(base + 6 * MIB).reinterpret(2 * MIB).get(ValueLayout.JAVA_BYTE, 7))
                .as("the pages were given back: a new map reads zeros").isZero();
        assertThat(memory.get(ValueLayout.JAVA_BYTE, 0)).as("the rest kept its data").isEqualTo((byte) 0x5a);

        source.unmap(base + 4 * MIB, 8 * MIB);
        source.releaseAddressSpace(base, 1024 * MIB);
        assertThat(source.mappedBytes()).isZero();
    }

    @Test
    void mappedBytesCountAgainstTheBudget() {
        long base = source.reserveAddressSpace(256 * MIB);
        source.map(base, 48 * MIB);
        assertThatThrownBy(() -> source.map(base + 48 * MIB, 32 * MIB))
                .isInstanceOf(OutOfDeviceMemoryException.class).hasMessageContaining("host budget");
        assertThat(source.mappedBytes()).as("a refused map changes nothing").isEqualTo(48 * MIB);
        source.map(base + 48 * MIB, 16 * MIB);                        // exactly the budget
        source.unmap(base, 64 * MIB);
        source.releaseAddressSpace(base, 256 * MIB);
    }

    @Test
    void aPhysicalAllocationKeepsItsBudgetWhileUnmappedAndMapsElsewhere() {
        long base = source.reserveAddressSpace(256 * MIB);
        long[] handles = {source.createPhysical(32 * MIB), source.createPhysical(32 * MIB)};
        assertThatThrownBy(() -> source.createPhysical(2 * MIB)).as("the two hold the whole budget")
                .isInstanceOf(OutOfDeviceMemoryException.class).hasMessageContaining("host budget");
        source.mapPhysical(base, 32 * MIB, handles, 2);
        MemorySegment.ofAddress(base).reinterpret(64 * MIB).fill((byte) 0x3c);
        assertThat(source.mappedBytes()).isEqualTo(64 * MIB);

        long[] out = new long[2];
        source.unmapPhysical(base, 32 * MIB, out, 2);
        assertThat(out).containsExactly(handles);
        assertThat(source.mappedBytes()).isZero();
        assertThatThrownBy(() -> source.createPhysical(2 * MIB)).as("unmapped, still charged")
                .isInstanceOf(OutOfDeviceMemoryException.class);
        assertThatThrownBy(() -> source.releasePhysical(123_456))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("unknown physical handle");

        source.mapPhysical(base + 128 * MIB, 32 * MIB, new long[] {out[1], out[0]}, 2);
        MemorySegment moved = MemorySegment.ofAddress(base + 128 * MIB).reinterpret(64 * MIB);
        moved.fill((byte) 0x4d);
        assertThat(moved.get(ValueLayout.JAVA_BYTE, 64 * MIB - 1)).isEqualTo((byte) 0x4d);
        assertThatThrownBy(() -> source.releasePhysical(out[0]))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("still mapped");
        assertThatThrownBy(() -> source.mapPhysical(base, 32 * MIB, new long[] {out[0]}, 1))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("already mapped");

        source.unmapPhysical(base + 128 * MIB, 32 * MIB, out, 2);
        source.releasePhysical(out[0]);
        source.releasePhysical(out[1]);
        assertThat(source.physicalAllocations()).isZero();
        source.releasePhysical(source.createPhysical(64 * MIB));    // the whole budget is back
        source.releaseAddressSpace(base, 256 * MIB);
    }

    @Test
    void misuseIsRefusedWithAMessageBeforeAnySystemCall() {
        long base = source.reserveAddressSpace(16 * MIB);
        source.map(base, 4 * MIB);
        assertThatThrownBy(() -> source.map(base + 2 * MIB, 4 * MIB))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("is already mapped");
        assertThatThrownBy(() -> source.unmap(base + 4 * MIB, 2 * MIB))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("is not mapped");
        assertThatThrownBy(() -> source.map(base + MIB, 2 * MIB))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("multiples of 2 MiB");
        assertThatThrownBy(() -> source.map(base + 14 * MIB, 4 * MIB))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not inside one reserved range");
        assertThatThrownBy(() -> source.releaseAddressSpace(base, 16 * MIB))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("still mapped");
        source.unmap(base, 4 * MIB);
        source.releaseAddressSpace(base, 16 * MIB);
    }
}
