package io.gpupool.serving;

import io.gpupool.model.BatchableModel;
import io.gpupool.model.BatchableModel.Member;
import io.gpupool.model.HostTensor;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import java.util.function.LongSupplier;

/**
 * The dynamic batcher of one model version on one device: requests wait here, are formed into batches and each
 * batch runs as one forward ({@link BatchableModel#inferBatch}) on one stream lease of the device's
 * {@link DeviceWorker}.
 *
 * <pre>
 *   request fills a batch alone? ─yes─► bypass: runs at once as without batching (InferenceService), never queued
 *               │ no
 *   submit ─► all slots busy and queue full? ─yes─► 503 (overloaded)
 *               │ no
 *               ▼
 *           waiting (FIFO) ──cancel/timeout──► leaves the queue, nobody else notices
 *               │
 *               ▼  whenever a request arrives, a batch ends, or the delay timer fires:
 *           while fewer than `slots` batches run:
 *             take the oldest requests while the next one still fits:
 *               requests ≤ maxRequests, tokens ≤ maxTokens, the model's layout allows it,
 *               planned peak (liveness plan) ≤ the pool's headroom  ── else "split": the rest waits
 *             dispatch now if a limit stopped the taking ("full"),
 *               or the rows taken so far reach a preferred batch size (the largest such prefix),
 *               or the oldest request has waited maxQueueDelay;
 *             otherwise arm the timer for oldest + maxQueueDelay and stop
 *               │
 *               ▼
 *           worker.submit(one job): skip members cancelled meanwhile, one forward; the lease goes back,
 *           then each member's outputs are encoded and answered on its own, on the answering executor
 * </pre>
 * Triton's meaning of the delay: it bounds how long a request is held back for company, measured from its
 * arrival, and only while a stream is free; while all {@code slots} batches run, requests accumulate anyway.
 * {@code slots} is at most the device's stream count (by default equal to it), so the batcher never queues batches
 * behind batches.
 *
 * <p>Encoding a response (JSON numbers for hundreds of floats per row) costs about as much host time per member
 * as the whole batch's forward enqueue, so it runs after the lease went back and off the worker thread, one task
 * per member: the stream takes its next batch at once, and the members' encodings run on several cores side by
 * side instead of one after the other on the device's worker thread. The outputs live in heap or automatic
 * arenas ({@link BatchableModel#inferBatch}), never in the lease's memory, so they outlive the job.
 *
 * <p>Isolation: a request is validated and converted ({@link BatchableModel#prepare}) before it is queued, so a
 * malformed one never joins a batch; a failure of the forward fails the requests in that batch only, with the
 * status the failure maps to alone; a failure encoding one member's response fails that member only. The first
 * request of a batch is always taken, even above {@code maxTokens} or the headroom: alone it is what it would be
 * without batching (and may still get 507).
 *
 * <p>State is guarded by this object's monitor; the sections move entries between lists and compute planned
 * peaks, never device work. {@link #waiting()} reads an atomic.
 */
final class BatchQueue {

    private final String model;
    private final BatchableModel replica;
    private final BatchPolicy policy;
    private final DeviceWorker worker;
    private final int slots;
    private final int capacity;
    /** Bytes the next batch may plan for: the pool's cap minus what it hands out now; Long.MAX_VALUE: no cap. */
    private final LongSupplier headroom;
    private final ScheduledExecutorService timer;
    /** Encodes and answers each member of a finished batch; a task it refuses runs on the calling thread. */
    private final Executor answering;
    private final BatchStatistics statistics;
    /** The protocol's statistics extension: one execution per forward. */
    private final ModelStatistics modelStatistics;
    private final long delayNanos;

    /** Guarded by {@code this}. */
    private final ArrayDeque<Entry> waiting = new ArrayDeque<>();
    /** Batches handed to the worker and not finished; guarded by {@code this}. */
    private int running;
    /** Guarded by {@code this}. */
    private ScheduledFuture<?> wakeUp;
    private long wakeUpAt;
    /** Guarded by {@code this}. */
    private boolean closed;
    /** Written under the monitor, read without it (load balancing). */
    private final AtomicInteger depth = new AtomicInteger();

    /** @param slots batches that may run at once, at most the device's streams */
    BatchQueue(String model, BatchableModel replica, BatchPolicy policy, DeviceWorker worker, int slots, int capacity,
               LongSupplier headroom, ScheduledExecutorService timer, Executor answering, BatchStatistics statistics,
               ModelStatistics modelStatistics) {
        if (slots < 1 || slots > worker.streams().size()) {
            throw new IllegalArgumentException("slots = " + slots + ", expected 1 to the device's "
                    + worker.streams().size() + " streams");
        }
        this.model = model;
        this.replica = replica;
        this.policy = policy;
        this.worker = worker;
        this.slots = slots;
        this.capacity = capacity;
        this.headroom = headroom;
        this.timer = timer;
        this.answering = answering;
        this.statistics = statistics;
        this.modelStatistics = modelStatistics;
        this.delayNanos = policy.maxQueueDelay().toNanos();
    }

    BatchPolicy policy() {
        return policy;
    }

    /** Most batches of this queue running at once. */
    int slots() {
        return slots;
    }

    BatchableModel replica() {
        return replica;
    }

    /**
     * Whether a request of this shape should skip the queue and run at once, exactly as without batching (the
     * service counts it as bypassed once its forward ran: a request the device queue refuses never ran). It does
     * when no other request could join its forward anyway: its tokens reach {@code maxTokens}, a batch holds one
     * request ({@code maxRequests} = 1), or the model's layout would not take even the smallest request beside it
     * (the padded layout beside a request of the model's largest shape). Queued, such a request could only wait out
     * the delay when it is alone, and its forward would go through the batched path's conversions and not through
     * the wrappers of a request alone (CUDA graphs).
     *
     * @param rows           the request's batch rows
     * @param tokens         rows × sequence length, or rows for a model without a sequence axis
     * @param sequenceLength 0 for a model without a sequence axis
     */
    boolean bypasses(int rows, int tokens, int sequenceLength) {
        return tokens >= policy.maxTokens() || policy.maxRequests() == 1
                || !replica.fitsOneForward(List.of(new Shape(rows, tokens, sequenceLength), Shape.SMALLEST));
    }

    /** A request's shape only, for asking the model about a forward before the request is prepared. */
    private record Shape(int rows, int tokens, int sequenceLength) implements Member {

        /** One row of one token: if not even this fits beside a request, nothing does. */
        static final Shape SMALLEST = new Shape(1, 1, 1);
    }

    /** Requests waiting for a batch now. */
    int waiting() {
        return depth.get();
    }

    /**
     * Queues one prepared request. Nothing happens until subscription; cancelling takes a waiting request out of
     * the queue (a running one finishes and its answer is dropped).
     *
     * @param started called on the worker thread when the request's batch starts computing
     * @param finish  turns the request's outputs into its answer, on the answering executor, after the lease went
     *                back; it may run beside other members' {@code finish}
     */
    <T> Mono<T> submit(Member member, Runnable started, Function<List<HostTensor>, T> finish) {
        return Mono.<Object>create(sink -> {
            Entry entry = new Entry(member, started, finish::apply, sink, System.nanoTime());
            sink.onCancel(() -> cancel(entry));
            synchronized (this) {
                if (closed) {
                    sink.error(ServingException.unavailable("device " + worker.device().index() + " is shutting down", 1));
                    return;
                }
                // As the device queue: refused only when no stream is free and the queue is full.
                if (waiting.size() >= capacity && running >= slots) {
                    sink.error(ServingException.unavailable("device " + worker.device().index() + " is overloaded: "
                            + waiting.size() + " requests of model '" + model + "' wait for a batch"
                            + " (gpupool.serving.queue-capacity=" + capacity + ")", 1));
                    return;
                }
                waiting.add(entry);
                depth.incrementAndGet();
            }
            dispatchReady();
        }).map(result -> {
            @SuppressWarnings("unchecked")
            T typed = (T) result;
            return typed;
        });
    }

    private void cancel(Entry entry) {
        entry.cancelled = true;
        synchronized (this) {
            if (waiting.remove(entry)) {
                depth.decrementAndGet();
                statistics.cancelledWhileWaiting(model);
            }
        }
    }

    /** Forms and launches every batch that is due while a slot is free; arms the timer for the next one. */
    private void dispatchReady() {
        List<List<Entry>> due = new ArrayList<>();
        synchronized (this) {
            while (!closed && running < slots && !waiting.isEmpty()) {
                List<Entry> batch = form(System.nanoTime());
                if (batch == null) {
                    break;
                }
                running++;
                due.add(batch);
            }
        }
        for (List<Entry> batch : due) {
            launch(batch);
        }
    }

    /** The next batch to run now, removed from the queue; null when it should wait out the delay. */
    private List<Entry> form(long now) {
        long room = headroom.getAsLong();
        List<Entry> batch = new ArrayList<>();
        List<Member> members = new ArrayList<>();
        int tokens = 0;
        int rows = 0;
        int preferredPrefix = 0;
        boolean full = false;
        boolean split = false;
        int[] preferred = policy.preferredBatchSizes();
        for (Iterator<Entry> it = waiting.iterator(); it.hasNext(); ) {
            Entry next = it.next();
            if (batch.size() == policy.maxRequests()) {
                full = true;
                break;
            }
            members.add(next.member);
            if (!batch.isEmpty()
                    && (tokens + next.member.tokens() > policy.maxTokens() || !replica.fitsOneForward(members))) {
                members.removeLast();
                full = true;
                break;
            }
            batch.add(next);
            tokens += next.member.tokens();
            rows += next.member.rows();
            if (java.util.Arrays.binarySearch(preferred, rows) >= 0) {
                preferredPrefix = batch.size();
            }
        }
        // The planned peak only grows with each member taken, so the longest prefix within the headroom is found
        // from the end: one plan when the batch fits, as it does unless the pool is nearly full.
        if (room != Long.MAX_VALUE && batch.size() > 1
                && replica.batchPeakBytes(members, worker.admission()::blockBytes) > room) {
            split = true;
            full = true;
            do {
                batch.removeLast();
                members.removeLast();
            } while (batch.size() > 1 && replica.batchPeakBytes(members, worker.admission()::blockBytes) > room);
        }
        full |= batch.size() == policy.maxRequests();
        if (!full) {
            if (preferredPrefix > 0) {
                batch = new ArrayList<>(batch.subList(0, preferredPrefix));
            } else {
                long due = waiting.peekFirst().enqueuedNanos + delayNanos;
                if (delayNanos > 0 && now - due < 0) {
                    wakeUpAt(due, now);
                    return null;
                }
            }
        }
        for (int i = 0; i < batch.size(); i++) {
            waiting.removeFirst();
        }
        depth.addAndGet(-batch.size());
        if (split) {
            statistics.splitForMemory(model);
        }
        return batch;
    }

    /** Arms the timer for {@code due} unless it already fires at or before it. */
    private void wakeUpAt(long due, long now) {
        if (wakeUp != null && wakeUpAt - due <= 0) {
            return;
        }
        if (wakeUp != null) {
            wakeUp.cancel(false);
        }
        wakeUpAt = due;
        wakeUp = timer.schedule(this::wokenUp, due - now, TimeUnit.NANOSECONDS);
    }

    /**
     * The timer fired. It is forgotten first, under the monitor, so that a batch formed while this one runs
     * arms a timer of its own instead of counting on this one, which may already have looked at the queue.
     */
    private void wokenUp() {
        synchronized (this) {
            wakeUp = null;
        }
        dispatchReady();
    }

    private void launch(List<Entry> batch) {
        List<Member> members = new ArrayList<>(batch.size());
        batch.forEach(entry -> members.add(entry.member));
        long charge = replica.batchPeakBytes(members, worker.admission()::blockBytes);
        worker.submit(charge, context -> run(batch, context)).subscribe(
                answers -> {
                    finished();
                    answers.run();
                },
                failure -> {
                    finished();
                    for (Entry entry : batch) {
                        entry.sink.error(failure);
                    }
                });
    }

    private void finished() {
        synchronized (this) {
            running--;
        }
        dispatchReady();
    }

    /** Runs on the worker thread with the lease: one forward for the members still wanted; returns their answers. */
    private Runnable run(List<Entry> batch, io.gpupool.model.ExecutionContext context) {
        List<Entry> live = new ArrayList<>(batch.size());
        for (Entry entry : batch) {
            if (!entry.cancelled) {
                live.add(entry);
            }
        }
        if (live.isEmpty()) {
            return () -> { };
        }
        long start = System.nanoTime();
        List<Member> members = new ArrayList<>(live.size());
        int rows = 0;
        int tokens = 0;
        for (Entry entry : live) {
            entry.started.run();
            if (!entry.delayRecorded) {    // a batch run again alone after an out-of-memory waited in the admission
                entry.delayRecorded = true;
                statistics.queueDelay(model, start - entry.enqueuedNanos);
            }
            members.add(entry.member);
            rows += entry.member.rows();
            tokens += entry.member.tokens();
        }
        List<List<HostTensor>> outputs;
        long inferStart = System.nanoTime();
        try {
            outputs = replica.inferBatch(members, context);
        } catch (IllegalArgumentException e) {
            statistics.executed(model, live.size(), rows, tokens);
            // Input the model checks itself beyond what prepare() checked; as a request alone is answered.
            ServingException rejected = ServingException.badRequest("model '" + model + "' rejected the request: "
                    + e.getMessage());
            return () -> live.forEach(entry -> entry.sink.error(rejected));
        } catch (io.gpupool.memory.OutOfDeviceMemoryException e) {
            // No execution: the worker runs the batch again alone (that run counts) before it answers 507.
            throw e;
        } catch (RuntimeException e) {
            statistics.executed(model, live.size(), rows, tokens);
            return () -> live.forEach(entry -> entry.sink.error(e));
        }
        statistics.executed(model, live.size(), rows, tokens);
        long inferred = System.nanoTime();
        statistics.forward(model, inferred - start);
        modelStatistics.recordExecution(rows, inferStart - start, inferred - inferStart);
        Execution execution = new Execution(rows, live.size());
        return () -> {
            execution.forwardEnded = System.nanoTime();
            for (int i = 0; i < live.size(); i++) {
                Entry entry = live.get(i);
                List<HostTensor> own = outputs.get(i);
                Runnable answer = () -> answer(entry, own, execution);
                try {
                    answering.execute(answer);
                } catch (RejectedExecutionException e) {
                    answer.run();                                   // shutting down: answer here rather than never
                }
            }
        };
    }

    /** Encodes one member's outputs into its answer (a failure there fails that member only) and answers it. */
    private void answer(Entry entry, List<HostTensor> outputs, Execution execution) {
        long begin = System.nanoTime();
        Object answer = null;
        RuntimeException failure = null;
        if (!entry.cancelled) {
            try {
                answer = entry.finish.apply(outputs);
            } catch (RuntimeException e) {
                failure = e;
            }
        }
        long encoded = System.nanoTime() - begin;
        execution.encoded(encoded);
        statistics.answered(model, begin - execution.forwardEnded, encoded);
        if (failure != null) {
            entry.sink.error(failure);
        } else if (!entry.cancelled) {
            entry.sink.success(answer);
        }
    }

    /**
     * The output phase of one forward for the protocol's statistics: the members' encoding times summed (they may
     * overlap in time), recorded once the last member is encoded.
     */
    private final class Execution {
        private final int rows;
        private final AtomicInteger left;
        private final AtomicLong outputNanos = new AtomicLong();
        /** When the lease went back and the members went to the answering executor; read after that hand-over. */
        private long forwardEnded;

        Execution(int rows, int members) {
            this.rows = rows;
            this.left = new AtomicInteger(members);
        }

        void encoded(long nanos) {
            outputNanos.addAndGet(nanos);
            if (left.decrementAndGet() == 0) {              // every other member added its time before its decrement
                modelStatistics.recordOutput(rows, outputNanos.get());
            }
        }
    }

    /** Refuses new requests and answers the waiting ones with 503; running batches finish. */
    void close() {
        List<Entry> dropped;
        synchronized (this) {
            closed = true;
            dropped = new ArrayList<>(waiting);
            waiting.clear();
            depth.set(0);
            if (wakeUp != null) {
                wakeUp.cancel(false);
            }
        }
        for (Entry entry : dropped) {
            entry.sink.error(ServingException.unavailable("device " + worker.device().index() + " is shutting down", 1));
        }
    }

    private static final class Entry {
        final Member member;
        final Runnable started;
        final Function<List<HostTensor>, Object> finish;
        final MonoSink<Object> sink;
        final long enqueuedNanos;
        volatile boolean cancelled;
        /** Its queue delay is counted (on its batch's first run); the worker threads hand it on through the admission. */
        volatile boolean delayRecorded;

        Entry(Member member, Runnable started, Function<List<HostTensor>, Object> finish, MonoSink<Object> sink,
              long enqueuedNanos) {
            this.member = member;
            this.started = started;
            this.finish = finish;
            this.sink = sink;
            this.enqueuedNanos = enqueuedNanos;
        }
    }
}
