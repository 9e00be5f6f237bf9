package io.gpupool.kernels.cuda;

import io.gpupool.kernels.cuda.CudaTensorOpsLaunchTest.RecordingDevice;
import io.gpupool.kernels.cuda.CudaTensorOpsLaunchTest.RecordingStream;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@link GemmTuner}'s procedure with a scripted device clock: the library's first choice stays unless another
 * candidate beats it by more than the margin in the confirmation too; a screening round's luck alone does not move
 * the choice; a candidate far behind after one round is not measured again; a candidate failing while measured never
 * wins; every measurement starts behind the caller's delay; with no candidate left the outcome says so.
 */
class GemmTunerTest {

    private final RecordingStream stream = new RecordingStream(new RecordingDevice());
    private final List<String> ran = new ArrayList<>();
    private final List<String> measured = new ArrayList<>();
    private int delays;

    private GemmTuner.Candidate candidate(String name) {
        return new GemmTuner.Candidate(name, () -> ran.add(name));
    }

    /**
     * Prices each measurement by the candidate that ran in it: its n-th measurement costs {@code times[n]} per run
     * (the last value repeating); a candidate without times is refused by the device.
     */
    private GemmTuner tuner(Map<String, double[]> times) {
        Map<String, Integer> seen = new HashMap<>();
        return new GemmTuner((timedStream, work) -> {
            int before = ran.size();
            work.run();
            String name = ran.get(before);
            measured.add(name);
            int n = seen.merge(name, 1, Integer::sum) - 1;
            double[] t = times.get(name);
            if (t == null) {
                throw new IllegalStateException("the device refused " + name);
            }
            return t[Math.min(n, t.length - 1)] * (ran.size() - before);
        });
    }

    private GemmTuner.Measured choose(GemmTuner tuner, String... names) {
        List<GemmTuner.Candidate> candidates = new ArrayList<>();
        for (String name : names) {
            candidates.add(candidate(name));
        }
        return tuner.choose(stream, "shape", candidates, () -> delays++);
    }

    @Test
    void aCandidateClearlyFasterInTheConfirmationToReplacesTheLibrarysFirstChoice() {
        GemmTuner tuner = tuner(Map.of("heuristic", new double[]{1.0}, "other", new double[]{3.0},
                "own", new double[]{0.8}));
        GemmTuner.Measured outcome = choose(tuner, "heuristic", "other", "own");

        assertThat(outcome.winner()).isEqualTo(2);
        assertThat(outcome.millis()).containsExactly(1.0, 3.0, 0.8);
        assertThat(measured.stream().filter("other"::equals)).as("3x the best after one round: not again").hasSize(1);
        assertThat(measured.stream().filter("own"::equals)).hasSize(GemmTuner.ROUNDS + GemmTuner.CONFIRM_ROUNDS);
        assertThat(measured.stream().filter("heuristic"::equals)).hasSize(GemmTuner.ROUNDS + GemmTuner.CONFIRM_ROUNDS);
        assertThat(delays).as("every measurement starts behind the delay").isEqualTo(measured.size());
    }

    @Test
    void aLeadWithinTheMarginOrOnlyInTheScreeningKeepsTheLibrarysFirstChoice() {
        // 2 % faster throughout: within the margin
        GemmTuner.Measured close = choose(tuner(Map.of("heuristic", new double[]{1.0}, "other", new double[]{0.98})),
                "heuristic", "other");
        assertThat(close.winner()).isZero();

        // fastest in the screening's median, no faster in the confirmation: screening luck
        GemmTuner.Measured lucky = choose(tuner(Map.of("heuristic", new double[]{1.0},
                "other", new double[]{0.5, 0.5, 0.5, 1.1})), "heuristic", "other");
        assertThat(lucky.winner()).isZero();
        assertThat(lucky.millis()[1]).as("its confirmation median").isEqualTo(1.1);

        // a tie goes to the earlier candidate without a confirmation
        measured.clear();
        GemmTuner.Measured tie = choose(tuner(Map.of("heuristic", new double[]{1.0}, "other", new double[]{1.0})),
                "heuristic", "other");
        assertThat(tie.winner()).isZero();
        assertThat(measured).hasSize(2 * GemmTuner.ROUNDS);
    }

    @Test
    void aCandidateFailingWhileMeasuredNeverWinsAndNoneLeftMeansNoWinner() {
        GemmTuner.Measured outcome = choose(tuner(Map.of("slow", new double[]{2.0})), "refused", "slow");
        assertThat(outcome.winner()).as("the library's first choice failed: the best of the rest").isEqualTo(1);
        assertThat(outcome.millis()[0]).isNaN();

        GemmTuner.Measured none = choose(tuner(Map.of()), "refused");
        assertThat(none.winner()).isEqualTo(-1);
        assertThat(none.winnerMillis()).isNaN();
    }
}
