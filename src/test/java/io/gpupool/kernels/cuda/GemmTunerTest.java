package io.gpupool.kernels.cuda;

import io.gpupool.kernels.cuda.CudaTensorOpsLaunchTest.RecordingDevice;
import io.gpupool.kernels.cuda.CudaTensorOpsLaunchTest.RecordingStream;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@link GemmTuner}'s procedure with a scripted clock: a tie goes to the earlier candidate (the library's own first
 * choice), the best round counts, a candidate failing while timed never wins, and with no candidate left the outcome
 * says so.
 */
class GemmTunerTest {

    private final RecordingStream stream = new RecordingStream(new RecordingDevice());
    private final List<String> ran = new ArrayList<>();

    private GemmTuner.Candidate candidate(String name) {
        return new GemmTuner.Candidate(name, () -> ran.add(name));
    }

    /** Prices each batch by the candidate that ran in it; {@code rounds} scripts one candidate's rounds in turn. */
    private GemmTuner tuner(Map<String, double[]> rounds) {
        Map<String, Integer> seen = new java.util.HashMap<>();
        return new GemmTuner((timedStream, work) -> {
            int before = ran.size();
            work.run();
            String name = ran.get(before);
            int round = seen.merge(name, 1, Integer::sum) - 1;
            double[] times = rounds.get(name);
            if (times == null) {
                throw new IllegalStateException("the device refused " + name);
            }
            return times[Math.min(round, times.length - 1)] * (ran.size() - before);
        });
    }

    @Test
    void aTieGoesToTheEarlierCandidateAndTheBestRoundCounts() {
        GemmTuner tuner = tuner(Map.of("heuristic", new double[]{1.0}, "other", new double[]{3.0, 1.0, 1.0},
                "own", new double[]{1.5, 0.9, 1.5}));
        GemmTuner.Measured measured = tuner.choose(stream, "shape",
                List.of(candidate("heuristic"), candidate("other"), candidate("own")));
        assertThat(measured.winner()).as("own's second round, 0.9 ms, beats the steady 1.0").isEqualTo(2);
        assertThat(measured.millis()[2]).isEqualTo(0.9);
        assertThat(measured.millis()[1]).as("3 ms after the first round: dropped, never timed again").isEqualTo(3.0);

        ran.clear();
        GemmTuner tie = tuner(Map.of("heuristic", new double[]{1.0}, "other", new double[]{1.0}));
        assertThat(tie.choose(stream, "shape", List.of(candidate("heuristic"), candidate("other"))).winner())
                .isZero();
    }

    @Test
    void aCandidateFailingWhileTimedNeverWinsAndNoneLeftMeansNoWinner() {
        GemmTuner tuner = tuner(Map.of("slow", new double[]{2.0}));
        GemmTuner.Measured measured = tuner.choose(stream, "shape", List.of(candidate("refused"), candidate("slow")));
        assertThat(measured.winner()).isEqualTo(1);
        assertThat(measured.millis()[0]).isNaN();

        GemmTuner.Measured none = tuner(Map.of()).choose(stream, "shape", List.of(candidate("refused")));
        assertThat(none.winner()).isEqualTo(-1);
        assertThat(none.winnerMillis()).isNaN();
    }
}
