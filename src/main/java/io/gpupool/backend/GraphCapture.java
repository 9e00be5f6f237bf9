package io.gpupool.backend;

/**
 * Records the device work a forward pass enqueues into a graph that can be launched again with new
 * data (CUDA stream capture), where a device offers it ({@link ComputeDevice#openGraphCapture}).
 *
 * <p>A capture facility owns one stream of its own that serves no request and never allocates from
 * a pool, so nothing but the capturing thread ever enqueues on it. One capture at a time:
 * <ol>
 *   <li>{@link #begin} switches the stream to capture mode and returns it. From then on, device work
 *       the calling thread enqueues on it (kernel launches, fills, device-to-device copies, and work
 *       a library enqueues on it) is recorded, not run.</li>
 *   <li>Host↔device copies are neither run nor recorded: the graph's inputs and outputs are copied by
 *       whoever launches it, on the launching stream, before and after the launch. The stream reports
 *       each copy to the {@link CopyListener} and enforces the one layout that makes that valid: all
 *       host-to-device copies before any device work, all device-to-host copies after it. A copy out
 *       of that order fails the call with {@link GraphCaptureException}.</li>
 *   <li>{@link DeviceStream#synchronize()} returns at once (nothing runs); host tasks fail.</li>
 *   <li>{@link #end} stops recording and instantiates the graph; {@link #abort} stops it and
 *       discards what was recorded. Either way the stream is back to normal.</li>
 * </ol>
 * The capture must not allocate device memory from the driver: every address the recorded work uses
 * has to stay valid for as long as the graph lives, so the caller hands out memory it holds itself.
 */
public interface GraphCapture extends AutoCloseable {

    /** Sees the host↔device copies of a capture, in order. */
    interface CopyListener {

        void hostToDevice(long deviceAddress, long bytes);

        void deviceToHost(long deviceAddress, long bytes);
    }

    /**
     * This facility's stream, for a warm-up run of the forward about to be captured, outside a capture (so that
     * libraries plan their calls and kernels load before recording starts). Valid until the next {@link #begin};
     * a failed capture may replace it.
     */
    DeviceStream stream();

    /**
     * Whether the stream is in capture mode now (the device's own view where it has one): false after
     * {@link #end} or {@link #abort}, whatever they returned or threw.
     */
    boolean capturing();

    /**
     * Starts a capture on this facility's stream and returns that stream.
     *
     * @throws IllegalStateException if a capture is already in progress
     */
    DeviceStream begin(CopyListener copies);

    /**
     * Stops the capture begun last and instantiates what it recorded.
     *
     * @throws GraphCaptureException if the device refused the capture (an unsupported call was made
     *                               during it) or the instantiation; the stream is out of capture mode
     *                               and usable afterwards either way
     */
    DeviceGraph end();

    /**
     * Stops a capture begun last and discards it; a no-op when none is in progress. Like a failed {@link #end},
     * it leaves the stream out of capture mode and usable (a facility replaces a stream it cannot recover).
     */
    void abort();

    /** Aborts any capture and destroys the stream. Graphs already made stay valid until closed. */
    @Override
    void close();
}
