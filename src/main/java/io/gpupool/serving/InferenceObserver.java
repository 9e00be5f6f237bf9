package io.gpupool.serving;

/**
 * What the serving layer reports about each queued inference request (metrics live outside this
 * package; the configuration adapts them to this). Calls come from event-loop and worker threads and
 * must not block.
 */
public interface InferenceObserver {

    /** Reports nothing. */
    InferenceObserver NONE = (model, device) -> new Tracker() {
        @Override
        public void started() {
        }

        @Override
        public void finished(int status) {
        }
    };

    /** A request for {@code model} entered the queue of {@code device}. */
    Tracker enqueued(String model, int device);

    /**
     * An inference request was answered with {@code status} before it reached a queue (bad request,
     * unknown model, body too large, model not ready). {@code model} is null when no served model has
     * that name.
     */
    default void rejected(String model, int status) {
    }

    /** The life of one request after it was queued. */
    interface Tracker {

        /** The request got its stream lease and starts computing. */
        void started();

        /**
         * The request ended with the HTTP status it is answered with, or {@link #CANCELLED} when the
         * client went away first. Called once.
         */
        void finished(int status);
    }

    /** Status passed to {@link Tracker#finished} for a request whose client cancelled or disconnected. */
    int CANCELLED = 0;
}
