package io.gpupool.replay;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.StreamFence;

/**
 * A replay stream whose fences complete when its current request ends ({@link FenceTiming.RequestEnd}):
 * the replay reports each block the stream allocates and frees, and when the stream's live bytes
 * return to 0 its request has ended, which stands for the synchronisation the server does at the end
 * of each request. Until then the memory the stream freed is still in use on the simulated device for
 * every other stream (the stream itself may reuse it at once: stream order).
 */
final class RequestEndReplayStream implements AllocationStream {

    private final int ordinal;
    /** Bytes the stream holds now; 0 between requests. */
    private long liveBytes;
    /** Requests this stream has finished; a fence is complete once this passed its value at recording. */
    private long requestsEnded;

    RequestEndReplayStream(int ordinal) {
        if (ordinal < 0) {
            throw new IllegalArgumentException("ordinal = " + ordinal + " is invalid; allowed: >= 0");
        }
        this.ordinal = ordinal;
    }

    /** The stream was handed a block of {@code bytes}. */
    void allocated(long bytes) {
        liveBytes += bytes;
    }

    /** The stream freed a block of {@code bytes} (after the pool recorded its fence); the last one ends the request. */
    void freed(long bytes) {
        liveBytes -= bytes;
        if (liveBytes == 0) {
            requestEnded();
        }
    }

    /** Whether the stream holds {@code bytes} and nothing else: a block of that size is its request's last. */
    boolean holdsOnly(long bytes) {
        return liveBytes == bytes;
    }

    /** The stream's request ended: its fences so far are complete. */
    void requestEnded() {
        requestsEnded++;
    }

    @Override
    public int ordinal() {
        return ordinal;
    }

    /** Requests ended so far, doubled, plus 1 between requests (nothing queued then: passed at once). */
    @Override
    public long syncMark() {
        return 2 * requestsEnded + (liveBytes == 0 ? 1 : 0);
    }

    /** A request end stands for the server's synchronisation: passed once a request ended after the mark. */
    @Override
    public boolean synchronizedSince(long mark) {
        return (mark & 1) == 1 || requestsEnded > mark >>> 1;
    }

    /**
     * Between requests (no live bytes) the stream has nothing queued, as a server stream after its
     * synchronisation: the fence is complete at once. Within a request it completes when the request ends.
     */
    @Override
    public StreamFence recordFence() {
        if (liveBytes == 0) {
            return new SimulatedFence(() -> true);
        }
        long recordedIn = requestsEnded;
        return new SimulatedFence(() -> requestsEnded > recordedIn);
    }

    @Override
    public String toString() {
        return "replay stream " + ordinal + " (fences complete when its request ends)";
    }
}
