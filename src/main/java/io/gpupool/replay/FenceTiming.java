package io.gpupool.replay;

/**
 * When the fences of a replayed stream complete, i.e. how far the simulated device runs behind the
 * host. A trace has no device, so the replay must assume one:
 * <ul>
 *   <li>{@link Lag} of 0 events: at once (the device keeps up; the published fragmentation numbers);</li>
 *   <li>{@link Lag} of N events: N trace events after the fence was recorded, whichever stream those
 *       events belong to (a device a fixed distance behind the host);</li>
 *   <li>{@link RequestEnd}: when the recording stream's request ends, i.e. when its live bytes are
 *       back to 0. This is what the server guarantees: each request ends with a synchronisation of its
 *       stream (the outputs are copied back), so everything enqueued on the stream is done when the
 *       stream takes its next request, while another stream's in-flight request may still be running.</li>
 * </ul>
 */
public sealed interface FenceTiming {

    /** Fences complete at once. */
    FenceTiming IMMEDIATE = new Lag(0);

    /** Fences complete {@code events} trace events after they were recorded (0: at once). */
    record Lag(long events) implements FenceTiming {
        public Lag {
            if (events < 0) {
                throw new IllegalArgumentException("fence lag = " + events + " events is invalid; allowed: >= 0");
            }
        }
    }

    /** Fences complete when the recording stream's live bytes next return to 0 (its request ended). */
    record RequestEnd() implements FenceTiming {
    }

    /** {@code request} or a number of events (0 = at once). */
    static FenceTiming parse(String text) {
        if (text.equals("request")) {
            return new RequestEnd();
        }
        try {
            return new Lag(Long.parseLong(text));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--fence-lag '" + text + "' is invalid; allowed: a number of events >= 0, "
                    + "or 'request' (fences complete when the recording stream's request ends)");
        }
    }
}
