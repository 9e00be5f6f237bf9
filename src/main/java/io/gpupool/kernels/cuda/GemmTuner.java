package io.gpupool.kernels.cuda;

import io.gpupool.backend.DeviceStream;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * Chooses how one GEMM shape runs by running every way offered for it on the stream and keeping the fastest: the
 * library's heuristic ranks algorithms by a model of the device, which at small token counts and odd shapes can
 * rank a slower algorithm (or the library itself, against gpupool's own kernels) first. The library's own first
 * choice stays unless another candidate beats it clearly twice.
 *
 * <h2>What one measurement is</h2>
 * <pre>
 *   delay        work that keeps the device busy (the caller's: fills of the stream's scratch), so that the runs
 *                below queue up behind it instead of starting one by one as the host enqueues them
 *   start event, REPS runs of the candidate, end event
 *   score        max(device time between the events, host time the REPS enqueues took) / REPS
 * </pre>
 * Behind the delay the events time the device alone, as in a forward whose queue is full; the host time is what
 * the same runs cost where the forward is enqueue-bound (a library call against one kernel launch). A forward runs at
 * the slower of the two, so that is the score.
 *
 * <h2>Procedure</h2>
 * <pre>
 *   candidates  c0 (the library's own first choice), c1 .. c(n-1) (its other offers), own kernels last
 *   1. each ci runs once, unmeasured: kernels loaded, caches warm; one that throws (the library refuses it) is
 *      dropped, logged at debug, and never decides anything
 *   2. screen: ROUNDS rounds, every remaining ci measured once a round, in turn (a drift of clocks falls on all
 *      alike); after the first round a candidate scoring more than DROP_FACTOR times the best is not measured again
 *      (it cannot win, and at large shapes its runs would be the largest cost); t(ci) = median of its rounds
 *   3. w = the lowest t (a tie to the earlier). w = c0, or c0 failed: w wins. Otherwise confirm: CONFIRM_ROUNDS more
 *      rounds of w and c0 alone, alternating which goes first; w wins only if its median beats c0's by more than
 *      MARGIN, else c0 does (a choice that is noise against the library's own costs nothing to leave out)
 * </pre>
 * Every candidate must write the same product into the same output from inputs none of them overwrites (the caller
 * offers only such operands), and the caller runs the winner once more afterwards, so the output ends up holding the
 * product whatever a failed candidate left there. Costs at most {@code n · (1 + ROUNDS · REPS) + 2 · CONFIRM_ROUNDS ·
 * REPS} products and as many synchronisations as measurements, once per shape.
 */
final class GemmTuner {

    private static final System.Logger LOG = System.getLogger(GemmTuner.class.getName());

    /** Screening rounds per candidate (step 2). */
    static final int ROUNDS = 3;
    /** Rounds of the winner against the library's first choice (step 3). */
    static final int CONFIRM_ROUNDS = 5;
    /** Runs per measurement. */
    static final int REPS = 5;
    /** A candidate scoring this many times the best after the first round is dropped (step 2). */
    static final double DROP_FACTOR = 2.0;
    /** How much faster than the library's first choice a candidate must be in the confirmation (step 3). */
    static final double MARGIN = 0.03;

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
     * candidate's score per run (NaN for one that failed; for the two confirmed, their confirmation medians).
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

    /**
     * Runs the procedure of the class comment on {@code stream}; {@code delay} enqueues the device work each
     * measurement starts behind (nothing where the caller has none); {@code shape} names the product in log lines.
     */
    Measured choose(DeviceStream stream, String shape, List<Candidate> candidates, Runnable delay) {
        int n = candidates.size();
        boolean[] failed = new boolean[n];
        for (int i = 0; i < n; i++) {
            try {
                candidates.get(i).run().run();
            } catch (RuntimeException e) {
                fail(failed, i, shape, candidates, "skipped", e);
            }
        }
        List<List<Double>> scores = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            scores.add(new ArrayList<>());
        }
        boolean[] dropped = new boolean[n];
        for (int round = 0; round < ROUNDS; round++) {
            if (round == 1) {
                double fastest = Double.POSITIVE_INFINITY;
                for (int i = 0; i < n; i++) {
                    fastest = failed[i] ? fastest : Math.min(fastest, scores.get(i).getFirst());
                }
                for (int i = 0; i < n; i++) {
                    dropped[i] = !failed[i] && scores.get(i).getFirst() > DROP_FACTOR * fastest;
                }
            }
            for (int i = 0; i < n; i++) {
                if (!failed[i] && !dropped[i]) {
                    measureInto(scores, failed, i, stream, shape, candidates, delay);
                }
            }
        }
        double[] millis = new double[n];
        int best = -1;
        for (int i = 0; i < n; i++) {
            millis[i] = failed[i] ? Double.NaN : median(scores.get(i));
            if (!failed[i] && (best < 0 || millis[i] < millis[best])) {
                best = i;
            }
        }
        if (best <= 0 || failed[0]) {
            return new Measured(best, millis);
        }
        List<List<Double>> confirm = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            confirm.add(new ArrayList<>());
        }
        for (int round = 0; round < CONFIRM_ROUNDS && !failed[best] && !failed[0]; round++) {
            int first = round % 2 == 0 ? best : 0;
            measureInto(confirm, failed, first, stream, shape, candidates, delay);
            measureInto(confirm, failed, first == 0 ? best : 0, stream, shape, candidates, delay);
        }
        if (failed[best] || failed[0]) {
            millis[best] = failed[best] ? Double.NaN : millis[best];
            millis[0] = failed[0] ? Double.NaN : millis[0];
            return new Measured(failed[best] ? (failed[0] ? -1 : 0) : best, millis);
        }
        millis[best] = median(confirm.get(best));
        millis[0] = median(confirm.get(0));
        return new Measured(millis[best] < (1 - MARGIN) * millis[0] ? best : 0, millis);
    }

    /** One measurement of candidate {@code i} (the class comment's score), or marks it failed. */
    private void measureInto(List<List<Double>> scores, boolean[] failed, int i, DeviceStream stream, String shape,
                             List<Candidate> candidates, Runnable delay) {
        Runnable run = candidates.get(i).run();
        long[] hostNanos = new long[1];
        try {
            delay.run();
            double device = timer.millis(stream, () -> {
                long started = System.nanoTime();
                for (int r = 0; r < REPS; r++) {
                    run.run();
                }
                hostNanos[0] = System.nanoTime() - started;
            });
            scores.get(i).add(Math.max(device, hostNanos[0] / 1e6) / REPS);
        } catch (RuntimeException e) {
            fail(failed, i, shape, candidates, "failed while measured, skipped", e);
        }
    }

    private static void fail(boolean[] failed, int i, String shape, List<Candidate> candidates, String what,
                             RuntimeException e) {
        failed[i] = true;
        LOG.log(System.Logger.Level.DEBUG, "{0}: candidate {1} {2}: {3}", shape, candidates.get(i).engine(), what,
                e.toString());
    }

    private static double median(List<Double> values) {
        if (values.isEmpty()) {
            return Double.NaN;
        }
        double[] sorted = values.stream().mapToDouble(Double::doubleValue).toArray();
        Arrays.sort(sorted);
        int n = sorted.length;
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    }
}
