package io.gpupool.backend.cuda;

import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The FFM launch path's marshalling, without a GPU: a driver stand-in reads the parameter array the way
 * {@code cuLaunchKernel} does (parameter i = the bytes at kernelParams[i]). A wrong slot or a clobbered value
 * would hand a kernel the wrong pointer or size on the GPU.
 */
class FfmKernelLauncherTest {

    private static final long STREAM = 0x5151L;

    /** One launch as the driver saw it: the handles, the grid, and each parameter's first 8 bytes. */
    record Seen(long function, long stream, int[] dims, List<Long> slotWords, long paramsAddress) {
    }

    private final List<Seen> seen = new ArrayList<>();
    private int argumentsPerLaunch;

    private int record(long function, int gx, int gy, int gz, int bx, int by, int bz, int shared, long stream,
                       MemorySegment params) {
        List<Long> words = new ArrayList<>();
        for (int i = 0; i < argumentsPerLaunch; i++) {
            MemorySegment slot = params.get(ADDRESS, 8L * i).reinterpret(8);
            words.add(slot.get(JAVA_LONG, 0));
        }
        seen.add(new Seen(function, stream, new int[] {gx, gy, gz, bx, by, bz, shared}, words, params.address()));
        return 0;
    }

    private static CudaFunction kernel() {
        return new CudaFunction(null, "k", new Cu.FunctionHandle());
    }

    @Test
    void eachArgumentReachesItsOwnParameterWithItsOwnSize() {
        FfmKernelLauncher launcher = new FfmKernelLauncher(this::record, STREAM);
        Object[] arguments = {0x1122334455667788L, -7, 2.5f, 42L, Integer.MAX_VALUE, -0.0f};
        argumentsPerLaunch = arguments.length;

        assertThat(launcher.launch(kernel(), 3, 2, 1, 128, 1, 1, 4096, arguments)).isZero();

        Seen launch = seen.getFirst();
        assertThat(launch.stream()).isEqualTo(STREAM);
        assertThat(launch.function()).as("the CUfunction's address (0: never loaded)").isZero();
        assertThat(launch.dims()).containsExactly(3, 2, 1, 128, 1, 1, 4096);
        List<Long> w = launch.slotWords();
        assertThat(w.get(0)).isEqualTo(0x1122334455667788L);
        assertThat((int) (long) w.get(1)).as("int in the low 4 bytes").isEqualTo(-7);
        assertThat(Float.intBitsToFloat((int) (long) w.get(2))).isEqualTo(2.5f);
        assertThat(w.get(3)).isEqualTo(42L);
        assertThat((int) (long) w.get(4)).isEqualTo(Integer.MAX_VALUE);
        assertThat(Float.floatToRawIntBits(Float.intBitsToFloat((int) (long) w.get(5))))
                .isEqualTo(Float.floatToRawIntBits(-0.0f));
    }

    @Test
    void laterLaunchesReuseTheBufferWithTheirOwnValues() {
        FfmKernelLauncher launcher = new FfmKernelLauncher(this::record, STREAM);
        argumentsPerLaunch = 2;
        for (long i = 0; i < 3; i++) {
            launcher.launch(kernel(), 1, 1, 1, 1, 1, 1, 0, new Object[] {i, (int) (10 * i)});
        }
        assertThat(seen).extracting(Seen::paramsAddress).as("one buffer for all launches").containsOnly(
                seen.getFirst().paramsAddress());
        for (int i = 0; i < 3; i++) {
            assertThat(seen.get(i).slotWords().get(0)).isEqualTo(i);
            assertThat((int) (long) seen.get(i).slotWords().get(1)).isEqualTo(10 * i);
        }
    }

    @Test
    void moreArgumentsThanSlotsGoThroughABufferOfTheLaunchesOwn() {
        FfmKernelLauncher launcher = new FfmKernelLauncher(this::record, STREAM, 2);
        argumentsPerLaunch = 5;
        launcher.launch(kernel(), 1, 1, 1, 1, 1, 1, 0, new Object[] {1L, 2L, 3, 4.0f, 5L});
        assertThat(seen.getFirst().slotWords().get(0)).isEqualTo(1L);
        assertThat((int) (long) seen.getFirst().slotWords().get(2)).isEqualTo(3);
        assertThat(Float.intBitsToFloat((int) (long) seen.getFirst().slotWords().get(3))).isEqualTo(4.0f);
        assertThat(seen.getFirst().slotWords().get(4)).isEqualTo(5L);
    }

    @Test
    void aLaunchWhileTheBufferIsInUseDoesNotOverwriteTheFirstLaunchesArguments() {
        // The stand-in driver launches again on the same launcher from inside the first call: what a second
        // thread launching on the same stream at that moment would do.
        List<Long> outerAfterInner = new ArrayList<>();
        FfmKernelLauncher[] self = new FfmKernelLauncher[1];
        argumentsPerLaunch = 1;
        FfmKernelLauncher.Driver reentrant = (f, gx, gy, gz, bx, by, bz, sh, st, params) -> {
            if (seen.isEmpty()) {
                record(f, gx, gy, gz, bx, by, bz, sh, st, params);
                self[0].launch(kernel(), 1, 1, 1, 1, 1, 1, 0, new Object[] {222L});
                outerAfterInner.add(params.get(ADDRESS, 0).reinterpret(8).get(JAVA_LONG, 0));
                return 0;
            }
            return record(f, gx, gy, gz, bx, by, bz, sh, st, params);
        };
        self[0] = new FfmKernelLauncher(reentrant, STREAM);

        self[0].launch(kernel(), 1, 1, 1, 1, 1, 1, 0, new Object[] {111L});

        assertThat(seen).extracting(s -> s.slotWords().getFirst()).containsExactly(111L, 222L);
        assertThat(outerAfterInner).containsExactly(111L);
        assertThat(seen.get(1).paramsAddress()).isNotEqualTo(seen.get(0).paramsAddress());
        // once both returned, the stream's buffer is free again
        self[0].launch(kernel(), 1, 1, 1, 1, 1, 1, 0, new Object[] {333L});
        assertThat(seen.get(2).paramsAddress()).isEqualTo(seen.get(0).paramsAddress());
    }

    @Test
    void theDriversResultComesBackAndTheBufferIsFreedAfterAFailure() {
        int[] results = {700, 0};
        int[] calls = {0};
        List<Long> addresses = new ArrayList<>();
        FfmKernelLauncher launcher = new FfmKernelLauncher((f, gx, gy, gz, bx, by, bz, sh, st, params) -> {
            addresses.add(params.address());
            return results[calls[0]++];
        }, STREAM);
        assertThat(launcher.launch(kernel(), 1, 1, 1, 1, 1, 1, 0, new Object[] {1L})).isEqualTo(700);
        assertThat(launcher.launch(kernel(), 1, 1, 1, 1, 1, 1, 0, new Object[] {1L})).isZero();
        assertThat(addresses.get(1)).isEqualTo(addresses.get(0));
    }

    @Test
    void argumentsThatAreNoKernelParameterAreRejectedNamingTheirPosition() {
        assertThatThrownBy(() -> KernelLauncher.checkArguments("axpb", new Object[] {1L, 2L, 1.0, 3}))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("argument 2 of axpb is a Double; kernels take Long, Integer or Float");
        assertThatThrownBy(() -> KernelLauncher.checkArguments("axpb", new Object[] {1L, null}))
                .isInstanceOf(IllegalArgumentException.class).hasMessage("argument 1 of axpb is null");
        FfmKernelLauncher launcher = new FfmKernelLauncher(this::record, STREAM);
        assertThatThrownBy(() -> launcher.launch(kernel(), 1, 1, 1, 1, 1, 1, 0, new Object[] {"x"}))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("argument 0 of k is a String");
        assertThat(seen).as("nothing reached the driver").isEmpty();
        argumentsPerLaunch = 1;
        launcher.launch(kernel(), 1, 1, 1, 1, 1, 1, 0, new Object[] {9L});
        assertThat(seen).as("the buffer was released after the rejected launch").hasSize(1);
    }
}
