package io.gpupool.backend.host;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.StreamFence;

/**
 * A fence on a host stream: the ticket of the last task queued on that stream when the fence was
 * recorded. It is complete once the stream's worker has run that task. Holds no native resource and
 * never changes, so one instance may be handed out for every fence of the same ticket (closing it is
 * a no-op and it stays usable).
 */
final class HostFence implements StreamFence {

    private final OrderedWorker worker;
    private final long ticket;

    HostFence(OrderedWorker worker, long ticket) {
        this.worker = worker;
        this.ticket = ticket;
    }

    long ticket() {
        return ticket;
    }

    @Override
    public boolean isComplete() {
        return worker.isDone(ticket);
    }

    /** Queues a task on {@code stream} that blocks its worker until this fence completes. */
    @Override
    public void makeWait(AllocationStream stream) {
        if (isComplete()) {
            return;
        }
        if (!(stream instanceof HostStream other)) {
            throw new IllegalArgumentException("a host fence can only make a host stream wait, got " + stream);
        }
        if (other.worker() == worker) {
            return; // same queue: order already holds
        }
        other.worker().submit(() -> worker.awaitTicket(ticket));
    }

    @Override
    public void await() {
        worker.awaitTicket(ticket);
    }

    @Override
    public void close() {
        // nothing native to release
    }
}
