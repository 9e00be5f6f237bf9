package io.gpupool.model.bert;

import io.gpupool.kernels.TensorOps;
import io.gpupool.model.BatchPadding;
import io.gpupool.model.BatchableModel.Member;
import io.gpupool.model.DataType;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.PaddedBatchPadding;
import io.gpupool.model.ShapePadding;
import io.gpupool.model.TensorSpec;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

/**
 * How {@link BertModel} runs a batch of requests, and how each request gets its own outputs back.
 *
 * <p>Notation: member r carries Bᵣ sequences of Sᵣ tokens; N = Σ Bᵣ, T = Σ Bᵣ·Sᵣ, S* = max Sᵣ.
 * <pre>
 *   packed (kernels with packed-sequence ops):   one forward of T token rows, PackedBertForward
 *     last_hidden_state rows  [ r0: B₀·S₀ | r1: B₁·S₁ | ... ]   member r's rows are contiguous
 *     pooled outputs rows     [ r0: B₀    | r1: B₁    | ... ]
 *   padded (fallback):  every sequence padded to S* (id 0, mask 0), one forward of [N, S*] through BertModel
 *     last_hidden_state  member r keeps the first Sᵣ positions of each of its rows
 * </pre>
 * Padding is masked, so a real token never attends to it and mean pooling skips it; the padded layout
 * still differs from a request alone where a request's own mask leaves a sequence with no real token
 * (alone its softmax spreads over Sᵣ keys, padded over S*), and it costs attention over S* for every
 * sequence. The layout is fixed per replica at load: packed when the device's kernels implement
 * {@link TensorOps#supportsPackedSequences} (the host backend; CUDA where attention computes in FP32: FP32,
 * TF32X3, TF32 without TF32 attention; head size up to 128; and BF16 on cuBLASLt with
 * {@code gpupool.kernels.packed-bf16}, off by default), padded otherwise (CUDA BF16 and TF32, whose attention
 * runs on tensor cores and has no varlen form).
 *
 * <p>With CUDA graphs on, a packed batch replays the graph of its bucket (total tokens and sequences rounded up:
 * {@code model.graph.ShapeBuckets}), run padded as {@link PackedPadding} explains; a padded-layout batch [N, S*]
 * replays the graph of the request bucket of (N, S*), run padded as {@link PaddedLayoutPadding} explains.
 */
final class BertBatching {

    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT;

    /**
     * INT32 arrays on the Java heap, zeroed: the members' inputs between validation and their batch's run, and the
     * batch's staged inputs. Nothing native is held while a request waits, and the staging needs no arena to close:
     * closing a shared arena stops every Java thread in a handshake (once per batch, on the device's worker thread),
     * while a confined one cannot be read by a stream that copies on a thread of its own (the host backend's).
     */
    private static final SegmentAllocator HEAP = (bytes, alignment) -> MemorySegment.ofArray(new int[(int) (bytes / Integer.BYTES)]);

    /**
     * One validated request: INT32 ids, mask and types of batch × seq (mask and types null when absent);
     * {@code maskedRow}: a sequence whose mask hides every token (its attention differs once padded).
     */
    record Sequences(int batch, int seq, MemorySegment ids, MemorySegment mask, MemorySegment types,
                     List<TensorSpec> selected, boolean maskedRow) implements Member {

        @Override
        public int rows() {
            return batch;
        }

        @Override
        public int tokens() {
            return batch * seq;
        }

        @Override
        public int sequenceLength() {
            return seq;
        }
    }

    private final BertModel model;
    /** Null where the kernels have no packed-sequence ops: then the padded layout. */
    private final PackedBertForward packed;
    /** How packed batches run at a graph's bucket; null with the padded layout. */
    private final PackedPadding padding;
    /** How padded-layout batches run at a graph's bucket; null with the packed layout. */
    private final PaddedLayoutPadding paddedLayoutPadding;

    BertBatching(BertModel model, String prefix, boolean pooler, TensorOps ops) {
        this.model = model;
        this.packed = ops.supportsPackedSequences(model.arch().headDim())
                ? new PackedBertForward(model, prefix, pooler, ops.activationBytes()) : null;
        this.padding = packed != null ? new PackedPadding(this) : null;
        this.paddedLayoutPadding = packed == null ? new PaddedLayoutPadding(this) : null;
    }

    String layout() {
        return packed != null ? "packed" : "padded";
    }

    /** The longest sequence a member may have (what {@link #prepare} accepts). */
    int maxSequenceLength() {
        return model.maxSequenceLength();
    }

    /** How packed batches run at a graph's bucket; empty with the padded layout. */
    Optional<BatchPadding> padding() {
        return Optional.ofNullable(padding);
    }

    /** How padded-layout batches run at a graph's bucket; empty with the packed layout. */
    Optional<PaddedBatchPadding> paddedLayoutPadding() {
        return Optional.ofNullable(paddedLayoutPadding);
    }

    /** The checks of {@link BertModel#infer}, with the same messages, and the INT32 conversion. */
    Sequences prepare(List<HostTensor> inputs, Set<String> requestedOutputs) {
        long[] shape = model.inputChecks().shape(inputs);
        List<TensorSpec> selected = model.selectOutputs(requestedOutputs);
        BertInputs.Tokens tokens = model.inputChecks().convert(HEAP, inputs, shape);
        return new Sequences(tokens.batch(), tokens.seq(), tokens.ids(), tokens.mask(), tokens.types(), selected,
                anyRowMasked(tokens));
    }

    /** Whether the mask hides every token of some sequence. */
    private static boolean anyRowMasked(BertInputs.Tokens tokens) {
        if (tokens.mask() == null) {
            return false;
        }
        for (int b = 0; b < tokens.batch(); b++) {
            boolean any = false;
            for (int s = 0; s < tokens.seq() && !any; s++) {
                any = tokens.mask().getAtIndex(INT, (long) b * tokens.seq() + s) != 0;
            }
            if (!any) {
                return true;
            }
        }
        return false;
    }

    long peakBytes(List<? extends Member> members, java.util.function.LongUnaryOperator blockBytes) {
        Totals totals = Totals.of(members);
        return packed != null ? packed.peakBytes(totals.sequences, totals.tokens, blockBytes)
                : model.peakActivationBytes(totals.sequences, totals.maxSeq, blockBytes);
    }

    /**
     * The padded layout's [N, S*] forward holds at most the cells of the largest request the model takes alone
     * (max_batch_size × max_sequence_length), which it was warmed up for: short sequences may pad more rows than
     * max_batch_size together, a batch never plans more than that largest request would.
     */
    boolean fitsOneForward(List<? extends Member> members) {
        if (packed != null) {
            return true;
        }
        Totals totals = Totals.of(members);
        return fitsPadded(totals.sequences, totals.maxSeq);
    }

    /** Whether a padded-layout forward of {@code rows} × {@code width} stays within the largest request's cells. */
    boolean fitsPadded(int rows, int width) {
        return (long) rows * width <= (long) model.maxBatchSize() * model.maxSequenceLength();
    }

    List<List<HostTensor>> run(List<? extends Member> members, ExecutionContext context) {
        List<Sequences> batch = sequences(members);
        return packed != null ? runPacked(batch, context) : runPadded(batch, context);
    }

    private List<List<HostTensor>> runPacked(List<Sequences> members, ExecutionContext context) {
        Totals totals = Totals.of(members);
        return runPacked(members, new BatchPadding.Shape(totals.sequences, totals.tokens), totals.maxSeq, context);
    }

    /**
     * The packed forward of {@code members} padded to {@code shape} ({@link PackedPadding}); {@code maxSeq} bounds
     * every sequence's length.
     */
    List<List<HostTensor>> runPackedAt(List<? extends Member> members, BatchPadding.Shape shape, int maxSeq,
                                       ExecutionContext context) {
        Totals totals = Totals.of(members);
        if (shape.sequences() < totals.sequences || shape.tokens() < totals.tokens || maxSeq < totals.maxSeq) {
            throw new IllegalStateException("a batch of " + totals.sequences + " sequences and " + totals.tokens
                    + " tokens (longest " + totals.maxSeq + ") cannot run padded to " + shape + " (longest " + maxSeq
                    + ")");
        }
        List<Sequences> batch = sequences(members);
        return runPacked(batch, shape, maxSeq, context);
    }

    /**
     * The packed forward of {@code members} at {@code shape}: their own totals (eager), or a graph's bucket, whose
     * padding {@link PackedPadding} explains. Only the members' rows of each output are downloaded (they come first).
     */
    private List<List<HostTensor>> runPacked(List<Sequences> members, BatchPadding.Shape shape, int maxSeq,
                                             ExecutionContext context) {
        Totals totals = Totals.of(members);
        boolean anyMask = members.stream().anyMatch(m -> m.mask() != null);
        boolean anyTypes = members.stream().anyMatch(m -> m.types() != null);
        int h = model.arch().hiddenSize();
        Arena results = Arena.ofAuto();
        Map<String, MemorySegment> outputs = new LinkedHashMap<>();
        for (String name : wantedNames(members)) {
            long rows = name.equals(BertModel.LAST_HIDDEN_STATE) ? totals.tokens : totals.sequences;
            int cols = name.equals(BertModel.LOGITS) ? model.numLabels() : h;
            outputs.put(name, results.allocate(rows * cols * Float.BYTES, 64));
        }
        packed.run(context, shape.sequences(), shape.tokens(),
                stagePacked(members, shape, maxSeq, anyMask, anyTypes), outputs);
        List<List<HostTensor>> perMember = new ArrayList<>(members.size());
        long token = 0;
        long sequence = 0;
        for (Sequences m : members) {
            List<HostTensor> own = new ArrayList<>(m.selected().size());
            for (TensorSpec spec : m.selected()) {
                long[] outShape = BertModel.concrete(spec.shape(), m.batch(), m.seq());
                long rowBytes = outShape[outShape.length - 1] * Float.BYTES;
                long first = spec.name().equals(BertModel.LAST_HIDDEN_STATE) ? token : sequence;
                long rows = spec.name().equals(BertModel.LAST_HIDDEN_STATE) ? m.tokens() : m.batch();
                MemorySegment data = outputs.get(spec.name()).asSlice(first * rowBytes, rows * rowBytes);
                own.add(new HostTensor(spec.name(), DataType.FP32, outShape, data));
            }
            perMember.add(own);
            token += m.tokens();
            sequence += m.batch();
        }
        return perMember;
    }

    /**
     * The members' INT32 inputs concatenated, with the positions restarting and an offset at each sequence, in arrays
     * of {@code shape}: past the members' tokens every input stays 0 (a valid id, type and position), and the
     * offsets of the sequences past theirs all point at the end of their tokens (empty sequences).
     */
    private static PackedBertForward.Batch stagePacked(List<Sequences> members, BatchPadding.Shape shape, int maxSeq,
                                                       boolean anyMask, boolean anyTypes) {
        long tokenBytes = (long) shape.tokens() * Integer.BYTES;
        MemorySegment ids = HEAP.allocate(tokenBytes);
        MemorySegment mask = anyMask ? HEAP.allocate(tokenBytes) : null;
        MemorySegment types = anyTypes ? HEAP.allocate(tokenBytes) : null;
        MemorySegment positions = HEAP.allocate(tokenBytes);
        MemorySegment offsets = HEAP.allocate((long) (shape.sequences() + 1) * Integer.BYTES);
        long token = 0;
        int sequence = 0;
        for (Sequences m : members) {
            long bytes = (long) m.tokens() * Integer.BYTES;
            MemorySegment.copy(m.ids(), 0, ids, token * Integer.BYTES, bytes);
            fill(mask, m.mask(), token, m.tokens(), 1);
            fill(types, m.types(), token, m.tokens(), 0);
            for (int b = 0; b < m.batch(); b++) {
                offsets.setAtIndex(INT, sequence++, (int) token);
                for (int s = 0; s < m.seq(); s++) {
                    positions.setAtIndex(INT, token++, s);
                }
            }
        }
        while (sequence <= shape.sequences()) {
            offsets.setAtIndex(INT, sequence++, (int) token);
        }
        return new PackedBertForward.Batch(ids, mask, types, positions, offsets, maxSeq, null);
    }

    /** Copies a member's INT32 input into the packed array at {@code token}, or fills in its default. */
    private static void fill(MemorySegment packedArray, MemorySegment own, long token, int count, int absentValue) {
        if (packedArray == null) {
            return;
        }
        if (own != null) {
            MemorySegment.copy(own, 0, packedArray, token * Integer.BYTES, (long) count * Integer.BYTES);
        } else {
            for (int i = 0; i < count; i++) {
                packedArray.setAtIndex(INT, token + i, absentValue);
            }
        }
    }

    private List<List<HostTensor>> runPadded(List<Sequences> members, ExecutionContext context) {
        Totals totals = Totals.of(members);
        boolean ragged = members.stream().anyMatch(m -> m.seq() != totals.maxSeq);
        boolean anyMask = ragged || members.stream().anyMatch(m -> m.mask() != null);
        return runPadded(members, totals.sequences, totals.maxSeq, anyMask, context);
    }

    /**
     * The padded-layout forward of {@code members} at {@code padded}, a graph's request bucket, whose padding
     * {@link PaddedLayoutPadding} explains; it always takes a mask.
     */
    List<List<HostTensor>> runPaddedAt(List<? extends Member> members, ShapePadding.Shape padded,
                                       ExecutionContext context) {
        Totals totals = Totals.of(members);
        if (padded.batch() < totals.sequences || padded.sequence() < totals.maxSeq
                || !fitsPadded(padded.batch(), padded.sequence())) {
            throw new IllegalStateException("a batch of " + totals.sequences + " sequences (longest " + totals.maxSeq
                    + ") cannot run padded to " + padded.batch() + "x" + padded.sequence());
        }
        List<Sequences> batch = sequences(members);
        return runPadded(batch, padded.batch(), padded.sequence(), true, context);
    }

    /**
     * One forward of {@code rows} × {@code width} (at least the members' sequences and longest sequence): the
     * members' rows first, each padded to {@code width}, then rows of padding; each member's outputs sliced back.
     */
    private List<List<HostTensor>> runPadded(List<Sequences> members, int rows, int width, boolean withMask,
                                             ExecutionContext context) {
        boolean anyTypes = members.stream().anyMatch(m -> m.types() != null);
        long cells = (long) rows * width;
        Map<String, HostTensor> outputs = new LinkedHashMap<>();
        // Row by row, each member's own INT32 rows (checked when it was prepared) are copied in whole; the padding
        // stays as allocated: id 0, mask 0, type 0.
        MemorySegment ids = HEAP.allocate(cells * Integer.BYTES);
        MemorySegment mask = withMask ? HEAP.allocate(cells * Integer.BYTES) : null;
        MemorySegment types = anyTypes ? HEAP.allocate(cells * Integer.BYTES) : null;
        long row = 0;
        for (Sequences m : members) {
            long rowBytes = (long) m.seq() * Integer.BYTES;
            for (int b = 0; b < m.batch(); b++, row++) {
                long own = b * rowBytes;
                long cell = row * width * Integer.BYTES;
                MemorySegment.copy(m.ids(), own, ids, cell, rowBytes);
                if (mask != null) {
                    if (m.mask() != null) {
                        MemorySegment.copy(m.mask(), own, mask, cell, rowBytes);
                    } else {
                        for (int t = 0; t < m.seq(); t++) {
                            mask.setAtIndex(INT, row * width + t, 1);
                        }
                    }
                }
                if (types != null && m.types() != null) {
                    MemorySegment.copy(m.types(), own, types, cell, rowBytes);
                }
            }
        }
        // A padding row gets one unmasked token, as a request's padding row does (BertPadding): its softmax is then
        // defined; its outputs are dropped.
        for (; row < rows; row++) {
            mask.setAtIndex(INT, row * width, 1);
        }
        for (HostTensor output : model.forward(rows, width, ids, mask, types,
                model.selectOutputs(wantedNames(members)), context)) {
            outputs.put(output.name(), output);
        }
        Arena results = Arena.ofAuto();
        List<List<HostTensor>> perMember = new ArrayList<>(members.size());
        long firstRow = 0;
        for (Sequences m : members) {
            List<HostTensor> own = new ArrayList<>(m.selected().size());
            for (TensorSpec spec : m.selected()) {
                long[] outShape = BertModel.concrete(spec.shape(), m.batch(), m.seq());
                MemorySegment all = outputs.get(spec.name()).data();
                long cols = outShape[outShape.length - 1];
                MemorySegment data;
                if (spec.name().equals(BertModel.LAST_HIDDEN_STATE)) {
                    data = results.allocate((long) m.tokens() * cols * Float.BYTES, 64);
                    long ownBytes = m.seq() * cols * Float.BYTES;
                    for (int b = 0; b < m.batch(); b++) {
                        MemorySegment.copy(all, (firstRow + b) * width * cols * Float.BYTES, data, b * ownBytes, ownBytes);
                    }
                } else {
                    data = all.asSlice(firstRow * cols * Float.BYTES, m.batch() * cols * Float.BYTES);
                }
                own.add(new HostTensor(spec.name(), DataType.FP32, outShape, data));
            }
            perMember.add(own);
            firstRow += m.batch();
        }
        return perMember;
    }

    /** The inputs a batch forward of {@code members} takes, by name, sorted; the mask also where {@code mask}. */
    static List<String> inputNames(List<? extends Member> members, boolean mask) {
        TreeSet<String> names = new TreeSet<>();
        names.add(BertModel.INPUT_IDS);
        if (mask) {
            names.add(BertModel.ATTENTION_MASK);
        }
        for (Member member : members) {
            Sequences m = (Sequences) member;
            if (m.mask() != null) {
                names.add(BertModel.ATTENTION_MASK);
            }
            if (m.types() != null) {
                names.add(BertModel.TOKEN_TYPE_IDS);
            }
        }
        return List.copyOf(names);
    }

    /** The members as this model prepared them ({@link #prepare}). */
    private static List<Sequences> sequences(List<? extends Member> members) {
        List<Sequences> batch = new ArrayList<>(members.size());
        for (Member member : members) {
            batch.add((Sequences) member);
        }
        return batch;
    }

    /** The outputs a batch forward of {@code members} computes: the union of their selections, sorted. */
    List<String> outputNames(List<? extends Member> members) {
        List<Sequences> batch = sequences(members);
        return List.copyOf(new TreeSet<>(wantedNames(batch)));
    }

    /** The union of the members' selections, in the model's output order. */
    Set<String> wantedNames(List<Sequences> members) {
        Set<String> wanted = new LinkedHashSet<>();
        for (TensorSpec spec : model.outputs()) {
            for (Sequences m : members) {
                if (m.selected().contains(spec)) {
                    wanted.add(spec.name());
                    break;
                }
            }
        }
        return wanted;
    }

    /** N, T and S* of a batch. */
    private record Totals(int sequences, int tokens, int maxSeq) {

        static Totals of(List<? extends Member> members) {
            int sequences = 0;
            int tokens = 0;
            int maxSeq = 0;
            for (Member member : members) {
                sequences = Math.addExact(sequences, member.rows());
                tokens = Math.addExact(tokens, member.tokens());
                maxSeq = Math.max(maxSeq, member.sequenceLength());
            }
            return new Totals(sequences, tokens, maxSeq);
        }
    }
}
