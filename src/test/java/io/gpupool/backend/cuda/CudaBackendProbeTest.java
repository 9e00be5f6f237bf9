package io.gpupool.backend.cuda;

import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.SymbolLookup;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

/** Runs in CI: on a machine without the CUDA driver, probing gives an empty backend instead of failing. */
class CudaBackendProbeTest {

    @Test
    void noDriverMeansNoBackendAndNoException() {
        assumeFalse(driverPresent(), "this machine has libcuda.so.1; the GPU tests cover it");
        assertThat(CudaBackend.tryCreate()).isEmpty();
    }

    private static boolean driverPresent() {
        try (Arena arena = Arena.ofConfined()) {
            SymbolLookup.libraryLookup("libcuda.so.1", arena);
            return true;
        } catch (IllegalArgumentException e) {
            return false;
        }
    }
}
