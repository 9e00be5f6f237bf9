package io.gpupool.backend;

/**
 * A recorded forward pass (see {@link GraphCapture}) that runs its device work again with one launch.
 * It reads and writes the addresses it was recorded with; the caller keeps that memory reserved for
 * as long as the graph lives and lets one launch use it at a time.
 */
public interface DeviceGraph extends AutoCloseable {

    /** Enqueues the whole graph on {@code stream}, after the work enqueued on it so far. */
    void launch(DeviceStream stream);

    /** Destroys the graph; launches already enqueued still complete. */
    @Override
    void close();
}
