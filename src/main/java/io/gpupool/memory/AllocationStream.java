package io.gpupool.memory;

/**
 * The pool's view of a stream: an ordered queue of device work that owns one local cache.
 *
 * <p>Memory freed by the owning stream can be reused by the same stream at once (stream order
 * guarantees earlier work finished first). Memory that moves to the global level and is then
 * handed to another stream is protected by a {@link StreamFence}: the pool records a fence on the
 * freeing stream and makes the next user's stream wait on it before it touches the memory
 * (a device-side wait on CUDA, no host blocking).
 */
public interface AllocationStream {

    /** Dense index of this stream on its device (0..n-1); selects the local cache. */
    int ordinal();

    /** Records a fence after all work queued so far on this stream. */
    StreamFence recordFence();

    /**
     * A mark for {@link #synchronizedSince}: taken when memory leaves the stream, after the work that
     * used it was queued. Streams that do not report their host synchronisations return 0.
     */
    default long syncMark() {
        return 0;
    }

    /**
     * Whether a host synchronisation of this stream that began after {@code mark} was taken has returned
     * (or the stream closed): then all work queued before the mark has finished, and memory freed under the
     * mark needs no fence. Never blocks; false for streams that do not report their synchronisations
     * ({@link SyncMarks} is how a stream does).
     */
    default boolean synchronizedSince(long mark) {
        return false;
    }
}
