package io.gpupool.backend.cuda;

import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.KernelFunction;
import io.gpupool.backend.KernelModule;
import org.junit.jupiter.api.Assumptions;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;

/** Shared helpers of the CUDA tests: a backend or a clean skip, and the test kernels. */
final class CudaTestSupport {

    /** Roughly the H200's SM clock; only used to turn milliseconds into spin cycles. */
    static final long CYCLES_PER_MILLI = 1_800_000L;

    private CudaTestSupport() {
    }

    static CudaBackend backendOrSkip(CudaBackend.Options options) {
        var backend = CudaBackend.tryCreate(options);
        Assumptions.assumeTrue(backend.isPresent(), "no CUDA driver or device on this machine");
        return backend.get();
    }

    static byte[] testPtx() {
        try (InputStream in = CudaTestSupport.class.getResourceAsStream("/ptx/backend_test_kernels.ptx")) {
            if (in == null) {
                throw new IllegalStateException("test resource /ptx/backend_test_kernels.ptx is missing");
            }
            return in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Keeps {@code stream} busy for about {@code millis} ms, then writes {@code value} into {@code ints} ints. */
    static void spinThenFill(DeviceStream stream, KernelFunction spin, long address, long ints, int value, long millis) {
        stream.launch(spin, 1, 1, 1, 32, 1, 1, 0, address, ints, value, millis * CYCLES_PER_MILLI);
    }

    static KernelFunction kernel(KernelModule module, String name) {
        return module.function(name);
    }
}
