package io.gpupool.memory.source;

import io.gpupool.replay.SimulatedChunkSource;

import io.gpupool.memory.OutOfDeviceMemoryException;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class FaultInjectingChunkSourceTest {

    private static final long MIB = 1L << 20;
    private final SimulatedChunkSource device = new SimulatedChunkSource("dev", 1L << 40);

    @Test
    void failsExactlyTheNthCall() {
        FaultInjectingChunkSource faulty = new FaultInjectingChunkSource(device).failOnCall(3);
        faulty.allocate(2 * MIB);
        faulty.allocate(2 * MIB);
        assertThatThrownBy(() -> faulty.allocate(2 * MIB)).isInstanceOf(OutOfDeviceMemoryException.class)
                .hasMessageContaining("call 3");
        faulty.allocate(2 * MIB);
        assertThat(faulty.injectedFailures()).isEqualTo(1);
        assertThat(device.liveChunks()).isEqualTo(3); // the injected failure never reached the device
    }

    @Test
    void failsEveryNthCall() {
        FaultInjectingChunkSource faulty = new FaultInjectingChunkSource(device).failEvery(4);
        List<Integer> failedCalls = new ArrayList<>();
        for (int call = 1; call <= 12; call++) {
            try {
                faulty.allocate(2 * MIB);
            } catch (OutOfDeviceMemoryException e) {
                failedCalls.add(call);
            }
        }
        assertThat(failedCalls).containsExactly(4, 8, 12);
    }

    @Test
    void aSeededProbabilityIsReproducibleAndNearTheRate() {
        List<Integer> first = failures(0.1, 7);
        assertThat(first).isEqualTo(failures(0.1, 7));
        assertThat(first).isNotEqualTo(failures(0.1, 8));
        assertThat(first.size()).isBetween(60, 140); // 1000 calls at p = 0.1, about 7 sigma either side
        assertThat(failures(0.0, 1)).isEmpty();
        assertThat(failures(1.0, 1)).hasSize(1000);
    }

    private List<Integer> failures(double p, long seed) {
        FaultInjectingChunkSource faulty = new FaultInjectingChunkSource(new SimulatedChunkSource("dev", 1L << 50))
                .failWithProbability(p, seed);
        List<Integer> failed = new ArrayList<>();
        for (int call = 1; call <= 1000; call++) {
            try {
                long address = faulty.allocate(2 * MIB);
                faulty.free(address, 2 * MIB);
            } catch (OutOfDeviceMemoryException e) {
                failed.add(call);
            }
        }
        return failed;
    }

    @Test
    void freeIsNeverFailedAndBadSettingsAreRejected() {
        FaultInjectingChunkSource faulty = new FaultInjectingChunkSource(device);
        long a = faulty.allocate(2 * MIB);
        faulty.failWithProbability(1.0, 1).failEvery(1);
        faulty.free(a, 2 * MIB);
        assertThat(device.liveChunks()).isZero();
        assertThatThrownBy(() -> faulty.failWithProbability(-0.1, 1)).hasMessageContaining("-0.1");
        assertThatThrownBy(() -> faulty.failOnCall(-1)).hasMessageContaining("failOnCall");
    }
}
