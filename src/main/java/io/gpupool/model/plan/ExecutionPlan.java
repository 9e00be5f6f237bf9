package io.gpupool.model.plan;

import io.gpupool.memory.DeviceBlock;
import io.gpupool.model.ExecutionContext;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.LongUnaryOperator;

/**
 * A model's forward pass as a fixed list of steps over named intermediate tensors, with each
 * tensor's lifetime worked out once when the model loads.
 *
 * <p>Notation: step {@code i} reads and writes tensors; tensor {@code t}'s size is a function of
 * the request's (batch, seq). {@code birth(t)} is the first step that writes t, {@code death(t)}
 * the last step that reads it. A request runs:
 * <pre>
 *   step:       0        1        2        3        4
 *   ids       [birth]--read--
 *   emb                [birth]--read--
 *   hidden                      [birth]--read------read
 *   pooled                                [birth]--read
 *                ^ allocate at birth    release after death ^
 * </pre>
 * <ol>
 *   <li>before step i, allocate every tensor born at i (from the request's allocator, on its stream);</li>
 *   <li>enqueue step i;</li>
 *   <li>release every tensor that dies at i. Release is stream-ordered: the pool hands the memory
 *       to later work on the same stream only, which runs after step i, so no host wait is needed.</li>
 * </ol>
 * So at any moment only the tensors a later step still needs are held, and the peak is
 * {@code max over i of sum(size(t) for t alive at i)} (sizes rounded up to the allocator's 256-byte
 * alignment), computable without running anything: {@link #livenessPeakBytes}. This is the minimum for
 * this step order, since every tensor alive at step i is read at or after i.
 *
 * <p>Tensors marked optional may be absent in a request (e.g. no attention mask): they are then
 * not allocated and steps see address 0. The planned peak counts them as present (an upper bound).
 *
 * <h2>Request arena ({@link Builder#requestArena}, {@code gpupool.serving.request-arena})</h2>
 * Instead of one allocation per tensor, a request takes one block, its arena, and each tensor lives at a
 * fixed offset inside it: {@link LifetimePacking} places the tensors' step lifetimes once per shape
 * ({@link ArenaLayouts} keeps the recent shapes).
 * <pre>
 *   the steps above in one arena (emb and hidden of one size, ids and pooled small):
 *            base ─►                               base + arenaBytes
 *   step 0                    [ ids ]
 *   step 1   [ emb ......... ][ ids ]
 *   step 2   [ emb ......... ][ hidden ........ ]      hidden takes the bytes ids left
 *   step 3   [pooled]         [ hidden ........ ]      pooled takes the bytes emb left
 *
 *   run: allocate(arenaBytes) before step 0; address(t) = base + offset(t); no release per tensor;
 *        release the arena after the final synchronize()
 * </pre>
 * The pool then sees one allocation and one release per request instead of one pair per tensor, and the
 * release comes when the stream's work on the arena has finished, so the freed block carries no pending
 * work. {@code arenaBytes} is at least the liveness peak (the packing may leave holes) and is what
 * {@link #peakBytes} answers in this mode, so an admission charges what the run takes. Absent optional
 * tensors keep their place (they are a request's inputs, a few bytes per token): the arena depends on
 * the shape alone, and the charge made before the run is exactly the block the run allocates.
 */
public final class ExecutionPlan {

    /** Allocations are rounded up to this by every allocator (see DeviceAllocator#allocate). */
    public static final long ALIGNMENT = LifetimePacking.ALIGNMENT;

    /** The size of a tensor for a request of {@code batch} sequences of {@code seq} tokens. */
    @FunctionalInterface
    public interface Size {
        long bytes(int batch, int seq);
    }

    /** The work of one step: enqueues device operations on the invocation's stream. */
    @FunctionalInterface
    public interface Kernel {
        void enqueue(Invocation invocation);
    }

    private record Tensor(String name, Size size, boolean optional) {
    }

    private record Step(String name, int[] reads, int[] writes, Kernel kernel) {
    }

    private final List<Tensor> tensors;
    private final List<Step> steps;
    /** births[i]: tensors allocated just before step i. */
    private final int[][] births;
    /** deaths[i]: tensors released just after step i. */
    private final int[][] deaths;
    /** birth[t], death[t]: the first step that writes tensor t, the last step that reads or writes it. */
    private final int[] birth;
    private final int[] death;
    /** One arena per request instead of a block per tensor. */
    private final boolean requestArena;
    private final ArenaLayouts arenas = new ArenaLayouts(this::pack);

    private ExecutionPlan(List<Tensor> tensors, List<Step> steps, boolean requestArena) {
        this.tensors = List.copyOf(tensors);
        this.steps = List.copyOf(steps);
        this.requestArena = requestArena;
        int n = tensors.size();
        int[] birth = new int[n];
        int[] death = new int[n];
        Arrays.fill(birth, -1);
        Arrays.fill(death, -1);
        for (int i = 0; i < steps.size(); i++) {
            for (int t : steps.get(i).writes()) {
                if (birth[t] < 0) {
                    birth[t] = i;
                }
                death[t] = Math.max(death[t], i);
            }
            for (int t : steps.get(i).reads()) {
                if (birth[t] < 0) {
                    throw new IllegalStateException("step '" + steps.get(i).name() + "' reads tensor '"
                            + tensors.get(t).name() + "' before any step writes it");
                }
                death[t] = Math.max(death[t], i);
            }
        }
        for (int t = 0; t < n; t++) {
            if (birth[t] < 0) {
                throw new IllegalStateException("tensor '" + tensors.get(t).name() + "' is never written");
            }
        }
        this.births = group(birth, steps.size());
        this.deaths = group(death, steps.size());
        this.birth = birth;
        this.death = death;
    }

    private static int[][] group(int[] stepOfTensor, int stepCount) {
        List<List<Integer>> lists = new ArrayList<>();
        for (int i = 0; i < stepCount; i++) {
            lists.add(new ArrayList<>());
        }
        for (int t = 0; t < stepOfTensor.length; t++) {
            lists.get(stepOfTensor[t]).add(t);
        }
        int[][] out = new int[stepCount][];
        for (int i = 0; i < stepCount; i++) {
            out[i] = lists.get(i).stream().mapToInt(Integer::intValue).toArray();
        }
        return out;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Rounding every allocator applies: up to {@link #ALIGNMENT}. */
    public static final LongUnaryOperator ALIGNED = bytes -> (bytes + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;

    /** Bytes a tensor takes from the allocator (0 if it has no elements). */
    private long allocated(int t, int batch, int seq) {
        return allocated(t, batch, seq, ALIGNED);
    }

    private long allocated(int t, int batch, int seq, LongUnaryOperator blockBytes) {
        long bytes = tensors.get(t).size().bytes(batch, seq);
        return bytes <= 0 ? 0 : blockBytes.applyAsLong(bytes);
    }

    /** Whether requests run in one arena ({@link Builder#requestArena}). */
    public boolean requestArena() {
        return requestArena;
    }

    /**
     * The most bytes one request of this shape holds at once from its allocator: with a request arena the
     * arena ({@link #arenaBytes}); else the sum over the tensors alive at the busiest step, each rounded up
     * to {@link #ALIGNMENT} ({@link #livenessPeakBytes}). A buddy pool may round further (to a power of
     * two); callers sizing such a pool should pass its rounding to {@link #peakBytes(int, int, LongUnaryOperator)}.
     */
    public long peakBytes(int batch, int seq) {
        return requestArena ? arenaBytes(batch, seq) : livenessPeakBytes(batch, seq);
    }

    /**
     * The peak as an allocator with coarser blocks holds it (bytes asked -&gt; bytes the allocator hands
     * out, at least the bytes asked): with a request arena the arena's one block, else each tensor
     * rounded by {@code blockBytes} before the sum.
     */
    public long peakBytes(int batch, int seq, LongUnaryOperator blockBytes) {
        if (requestArena) {
            long arena = arenaBytes(batch, seq);
            return arena == 0 ? 0 : blockBytes.applyAsLong(arena);
        }
        return livenessPeak(batch, seq, blockBytes);
    }

    /**
     * The sum over the tensors alive at the busiest step, each rounded up to {@link #ALIGNMENT}: what a
     * request holds at its peak with a block per tensor, and the least any arena can have.
     */
    public long livenessPeakBytes(int batch, int seq) {
        return livenessPeak(batch, seq, ALIGNED);
    }

    private long livenessPeak(int batch, int seq, LongUnaryOperator blockBytes) {
        long live = 0;
        long peak = 0;
        for (int i = 0; i < steps.size(); i++) {
            for (int t : births[i]) {
                live += allocated(t, batch, seq, blockBytes);
            }
            peak = Math.max(peak, live);
            for (int t : deaths[i]) {
                live -= allocated(t, batch, seq, blockBytes);
            }
        }
        return peak;
    }

    /** Bytes of the arena of a request of this shape (whether or not this plan runs in arenas). */
    public long arenaBytes(int batch, int seq) {
        return arenas.get(batch, seq).blockBytes();
    }

    /** Shapes whose packing is kept now (at most {@link ArenaLayouts#CAPACITY}). */
    int cachedArenaShapes() {
        return arenas.size();
    }

    /** Each tensor of the shape at its step lifetime [birth, death + 1), every tensor counted as present. */
    private LifetimePacking pack(int batch, int seq) {
        int n = tensors.size();
        long[] sizes = new long[n];
        int[] to = new int[n];
        for (int t = 0; t < n; t++) {
            sizes[t] = Math.max(0, tensors.get(t).size().bytes(batch, seq));
            to[t] = death[t] + 1;
        }
        return LifetimePacking.pack(sizes, birth, to);
    }

    /**
     * The largest single allocation a request of this shape makes: its arena with a request arena, else its
     * largest tensor.
     */
    public long largestAllocationBytes(int batch, int seq) {
        if (requestArena) {
            return arenaBytes(batch, seq);
        }
        long largest = 0;
        for (int t = 0; t < tensors.size(); t++) {
            largest = Math.max(largest, allocated(t, batch, seq));
        }
        return largest;
    }

    /** Number of tensors; ids handed out by the builder are 0..tensorCount()-1. */
    public int tensorCount() {
        return tensors.size();
    }

    /**
     * Runs every step for one request, then synchronises the stream. On success and on failure
     * alike, every block taken is released before this returns; a failure is rethrown after the
     * stream has been drained (a failure to drain is attached as suppressed). With a request arena
     * the request takes one block, released after the synchronisation (see the class comment).
     *
     * @param absent tensors (optional ones) this request does not have; steps see address 0
     * @param state  request-specific host state the kernels read (inputs, output buffers)
     */
    public void run(ExecutionContext context, int batch, int seq, boolean[] absent, Object state) {
        if (requestArena) {
            runInArena(context, batch, seq, absent, state);
            return;
        }
        int n = tensors.size();
        Invocation invocation = new Invocation(context, batch, seq, new long[n], state);
        DeviceBlock[] blocks = new DeviceBlock[n];
        try {
            for (int i = 0; i < steps.size(); i++) {
                for (int t : births[i]) {
                    if (absent != null && absent[t]) {
                        if (!tensors.get(t).optional()) {
                            throw new IllegalArgumentException("tensor '" + tensors.get(t).name() + "' is required");
                        }
                        continue;
                    }
                    long bytes = tensors.get(t).size().bytes(batch, seq);
                    if (bytes > 0) {
                        blocks[t] = context.allocator().allocate(bytes, context.stream());
                        invocation.addresses[t] = blocks[t].address();
                    }
                }
                steps.get(i).kernel().enqueue(invocation);
                for (int t : deaths[i]) {
                    if (blocks[t] != null) {
                        DeviceBlock block = blocks[t];
                        blocks[t] = null;
                        invocation.addresses[t] = 0;
                        block.release();
                    }
                }
            }
            context.stream().synchronize();
        } catch (RuntimeException | Error failure) {
            drainAfter(context, failure);
            for (int t = 0; t < n; t++) {
                if (blocks[t] != null) {
                    try {
                        blocks[t].release();
                    } catch (RuntimeException releaseFailure) {
                        failure.addSuppressed(releaseFailure);
                    }
                    blocks[t] = null;
                }
            }
            throw failure;
        }
    }

    /** Waits for the stream's queued work after {@code failure}; a failure to drain is attached to it. */
    private static void drainAfter(ExecutionContext context, Throwable failure) {
        try {
            context.stream().synchronize();
        } catch (RuntimeException drain) {
            if (drain != failure) {
                failure.addSuppressed(drain);
            }
        }
    }

    /**
     * {@link #run} with one block for the whole request: the tensors at their arena offsets, released
     * once after the stream is synchronised (on failure after it is drained).
     */
    private void runInArena(ExecutionContext context, int batch, int seq, boolean[] absent, Object state) {
        int n = tensors.size();
        if (absent != null) {
            for (int t = 0; t < n; t++) {
                if (absent[t] && !tensors.get(t).optional()) {
                    throw new IllegalArgumentException("tensor '" + tensors.get(t).name() + "' is required");
                }
            }
        }
        LifetimePacking arena = arenas.get(batch, seq);
        Invocation invocation = new Invocation(context, batch, seq, new long[n], state);
        DeviceBlock block = null;
        try {
            long base = 0;
            if (arena.blockBytes() > 0) {
                block = context.allocator().allocateArena(arena.blockBytes(), context.stream());
                base = block.address();
            }
            for (int i = 0; i < steps.size(); i++) {
                for (int t : births[i]) {
                    if (arena.size(t) > 0 && (absent == null || !absent[t])) {
                        invocation.addresses[t] = base + arena.offset(t);
                    }
                }
                steps.get(i).kernel().enqueue(invocation);
                for (int t : deaths[i]) {
                    invocation.addresses[t] = 0;      // its bytes belong to later tensors now
                }
            }
            context.stream().synchronize();
        } catch (RuntimeException | Error failure) {
            drainAfter(context, failure);
            if (block != null) {
                try {
                    block.release();
                } catch (RuntimeException releaseFailure) {
                    failure.addSuppressed(releaseFailure);
                }
            }
            throw failure;
        }
        if (block != null) {
            block.releaseSettled();                   // synchronised above: the stream's work on it has finished
        }
    }

    /** What a step sees: the request's context and shape, the device address of each tensor. */
    public static final class Invocation {
        private final ExecutionContext context;
        private final int batch;
        private final int seq;
        private final long[] addresses;
        private final Object state;

        Invocation(ExecutionContext context, int batch, int seq, long[] addresses, Object state) {
            this.context = context;
            this.batch = batch;
            this.seq = seq;
            this.addresses = addresses;
            this.state = state;
        }

        public ExecutionContext context() {
            return context;
        }

        public int batch() {
            return batch;
        }

        public int seq() {
            return seq;
        }

        /** Device address of tensor {@code id}, or 0 if it is absent or empty. */
        public long address(int id) {
            return addresses[id];
        }

        /** The request's host state, as passed to {@link ExecutionPlan#run}. */
        @SuppressWarnings("unchecked")
        public <T> T state() {
            return (T) state;
        }
    }

    /** Declares tensors and steps in execution order. */
    public static final class Builder {
        private final List<Tensor> tensors = new ArrayList<>();
        private final List<Step> steps = new ArrayList<>();
        private boolean requestArena;

        private Builder() {
        }

        /**
         * Runs each request in one arena, its tensors at offsets packed from their lifetimes, instead of a
         * block per tensor (see the class comment); off by default.
         */
        public Builder requestArena(boolean requestArena) {
            this.requestArena = requestArena;
            return this;
        }

        /** Declares a tensor; returns its id. */
        public int tensor(String name, Size size) {
            tensors.add(new Tensor(name, size, false));
            return tensors.size() - 1;
        }

        /** Declares a tensor a request may lack (see {@link ExecutionPlan#run}'s {@code absent}). */
        public int optionalTensor(String name, Size size) {
            tensors.add(new Tensor(name, size, true));
            return tensors.size() - 1;
        }

        /** Appends a step that reads {@code reads} and writes {@code writes}. */
        public Builder step(String name, int[] reads, int[] writes, Kernel kernel) {
            steps.add(new Step(name, reads.clone(), writes.clone(), kernel));
            return this;
        }

        public ExecutionPlan build() {
            return new ExecutionPlan(tensors, steps, requestArena);
        }
    }

    /** Convenience for step declarations: {@code ids(a, b)}. */
    public static int[] ids(int... ids) {
        return ids;
    }
}
