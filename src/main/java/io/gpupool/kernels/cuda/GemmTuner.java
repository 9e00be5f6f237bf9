package io.gpupool.kernels.cuda;

import io.gpupool.backend.DeviceStream;

import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * Chooses how one GEMM shape runs by running every way offered for it on the stream and keeping the fastest: the
 * library's heuristic ranks algorithms by a model of the device, which at small token counts and odd shapes can
 * rank a slower algorithm (or the library itself, against gpupool's own kernels) first.
 *
 * <h2>Procedure</h2>
 * <pre>
 *   candidates  c0 (the library's own first choice), c1 .. c(n-1) (its other offers), own kernels last
 *   1. each ci runs once, untimed: kernels loaded, caches warm; one that throws (the library refuses it) is
 *      dropped, logged at debug, and never decides anything
 *   2. ROUNDS rounds; in each, every remaining ci runs REPS times back to back between two timing events
 *      (Timer), the candidates in turn, so that a clock or thermal drift falls on all of them alike
 *      after the first round, a candidate more than DROP_FACTOR times the best so far is not timed again: it
 *      cannot win, and at large shapes its runs are the measurement's largest cost
 *   3. t(ci) = its best round's time / REPS; the lowest t wins, a tie going to the earlier candidate
 * </pre>
 * Every candidate must write the same product into the same output from inputs none of them overwrites (the caller
 * offers only such operands), and the caller runs the winner once more afterwards, so the output ends up holding the
 * product whatever a failed candidate left there. Costs at most {@code n · (1 + ROUNDS · REPS)} products and
 * {@code ROUNDS · n} synchronisations, once per shape.
 */
final class GemmTuner {

    private static final System.Logger LOG = System.getLogger(GemmTuner.class.getName());

    /** Rounds of timing per candidate; the best counts (a round disturbed by another stream's work does not). */
    static final int ROUNDS = 3;
    /** Back-to-back runs between two timing events: enough that launch latency does not hide the kernel. */
    static final int REPS = 5;
    /** A candidate this many times slower than the best after the first round is dropped (step 2). */
    static final double DROP_FACTOR = 2.0;

    /** Device time of what {@code work} enqueues on {@code stream}, in milliseconds; blocks until it finished. */
    @FunctionalInterface
    interface Timer {
        double millis(DeviceStream stream, Runnable work);
    }

    /** Timing events on the stream itself ({@link DeviceStream#timeMillis}). */
    static final Timer DEVICE_EVENTS = DeviceStream::timeMillis;

    /** One way to run the shape: {@code engine} names it for the operator, {@code run} enqueues it once. */
    record Candidate(String engine, Runnable run) {
        Candidate {
            Objects.requireNonNull(engine, "engine");
            Objects.requireNonNull(run, "run");
        }
    }

    /**
     * The outcome: {@code winner} indexes the candidates (-1 when every one failed) and {@code millis} holds each
     * candidate's time per run (NaN for one that failed).
     */
    record Measured(int winner, double[] millis) {

        /** The winner's time per run; NaN when none ran. */
        double winnerMillis() {
            return winner < 0 ? Double.NaN : millis[winner];
        }
    }

    private final Timer timer;

    GemmTuner(Timer timer) {
        this.timer = Objects.requireNonNull(timer, "timer");
    }

    /** Runs the procedure of the class comment on {@code stream}; {@code shape} names the product in log lines. */
    Measured choose(DeviceStream stream, String shape, List<Candidate> candidates) {
        int n = candidates.size();
        double[] best = new double[n];
        Arrays.fill(best, Double.POSITIVE_INFINITY);
        boolean[] failed = new boolean[n];
        for (int i = 0; i < n; i++) {
            try {
                candidates.get(i).run().run();
            } catch (RuntimeException e) {
                failed[i] = true;
                LOG.log(System.Logger.Level.DEBUG, "{0}: candidate {1} skipped: {2}", shape,
                        candidates.get(i).engine(), e.toString());
            }
        }
        boolean[] dropped = new boolean[n];
        for (int round = 0; round < ROUNDS; round++) {
            if (round == 1) {
                double fastest = Arrays.stream(best).min().orElse(Double.POSITIVE_INFINITY);
                for (int i = 0; i < n; i++) {
                    dropped[i] = best[i] > DROP_FACTOR * fastest;
                }
            }
            for (int i = 0; i < n; i++) {
                if (failed[i] || dropped[i]) {
                    continue;
                }
                Runnable run = candidates.get(i).run();
                try {
                    double millis = timer.millis(stream, () -> {
                        for (int r = 0; r < REPS; r++) {
                            run.run();
                        }
                    }) / REPS;
                    best[i] = Math.min(best[i], millis);
                } catch (RuntimeException e) {
                    failed[i] = true;
                    LOG.log(System.Logger.Level.DEBUG, "{0}: candidate {1} failed while timed, skipped: {2}", shape,
                            candidates.get(i).engine(), e.toString());
                }
            }
        }
        int winner = -1;
        double[] millis = new double[n];
        for (int i = 0; i < n; i++) {
            millis[i] = failed[i] ? Double.NaN : best[i];
            if (!failed[i] && (winner < 0 || best[i] < best[winner])) {
                winner = i;
            }
        }
        return new Measured(winner, millis);
    }
}
