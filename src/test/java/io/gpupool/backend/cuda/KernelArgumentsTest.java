package io.gpupool.backend.cuda;

import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The kernelParams block the FFM launch path hands cuLaunchKernel: pointer i leads to argument i in its C type. */
class KernelArgumentsTest {

    @Test
    void eachPointerLeadsToItsArgumentInTheKernelsType() {
        try (KernelArguments block = new KernelArguments()) {
            long params = block.fill("k", new Object[] {0x7f00_1234_5678L, 768, 1e-12f, -1L});
            MemorySegment pointers = MemorySegment.ofAddress(params).reinterpret(8L * KernelArguments.MAX);
            assertThat(at(pointers, 0).get(JAVA_LONG, 0)).isEqualTo(0x7f00_1234_5678L);
            assertThat(at(pointers, 1).get(JAVA_INT, 0)).isEqualTo(768);
            assertThat(at(pointers, 2).get(JAVA_FLOAT, 0)).isEqualTo(1e-12f);
            assertThat(at(pointers, 3).get(JAVA_LONG, 0)).isEqualTo(-1L);

            // the next launch reuses the block: the same pointers, new values
            assertThat(block.fill("k", new Object[] {5})).isEqualTo(params);
            assertThat(at(pointers, 0).get(JAVA_INT, 0)).isEqualTo(5);
        }
    }

    @Test
    void aNullOrUnsupportedArgumentOrTooManyAreRefusedByName() {
        try (KernelArguments block = new KernelArguments()) {
            assertThatThrownBy(() -> block.fill("gemm", new Object[] {1L, null}))
                    .hasMessage("argument 1 of gemm is null");
            assertThatThrownBy(() -> block.fill("gemm", new Object[] {1.0}))
                    .hasMessageContaining("argument 0 of gemm is a Double");
            assertThatThrownBy(() -> block.fill("gemm", new Object[KernelArguments.MAX + 1]))
                    .hasMessageContaining("at most " + KernelArguments.MAX);
        }
    }

    private static MemorySegment at(MemorySegment pointers, int index) {
        return MemorySegment.ofAddress(pointers.getAtIndex(JAVA_LONG, index)).reinterpret(8);
    }
}
