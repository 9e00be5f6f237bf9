package io.gpupool.kernels.cuda;

import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.MatmulLibrary;
import io.gpupool.backend.MatmulLibrary.Compute;
import io.gpupool.backend.MatmulLibrary.ElementType;
import io.gpupool.backend.MatmulLibrary.Epilogue;
import io.gpupool.backend.MatmulLibrary.Matmul;
import io.gpupool.kernels.StreamWorkspaces;
import io.gpupool.kernels.TensorOps.Activation;
import io.gpupool.kernels.TensorOps.GemmChoice;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The linear layers of {@link CudaTensorOps} through a {@link MatmulLibrary} (cuBLASLt through FFM, see
 * {@code backend/cuda/CublasLtLibrary}): every product is one library call, planned once per stream and shape,
 * optionally measured first ("Choosing per shape"). Where the library declines a shape, or the pointers are outside
 * what plans cover, {@link #product} answers false and the caller runs {@link GemmKernels}. Per stream this keeps
 * <pre>
 *   stream ──► LibraryStreamState { plans: (rows, in, out, residual, epilogue) ──► Matmul, planned once by the
 *                                   heuristic; pinned by useWorkspace (a graph capture): the caller's memory }
 *   stream ──► StreamWorkspaces: one pool block of MatmulLibrary.workspaceBytes() for a stream not pinned,
 *              allocated on its first product, kept while it is busy, given back when its owner releases the
 *              idle stream; pinned for good once a CUDA graph captured its address
 * </pre>
 * (plans take the workspace address per run, so a workspace given back and taken again elsewhere leaves them
 * valid). Epilogues: bias always fused; GELU fused (the library's tanh form, within 5e-4 of erf) under TF32 and
 * BF16, where rounding is larger anyway; under FP32 the exact erf GELU, and TANH everywhere, run as one extra
 * in-place pass ({@link GemmKernels#activate}), so FP32 stays within 1e-4 of transformers. With a residual the
 * library adds it itself (its C operand, beta = 1, out of place).
 *
 * <h2>Choosing per shape</h2>
 * With {@link KernelOptions#tuneGemms()} (off by default) the heuristic's first choice is not taken on trust. The first
 * time any stream runs a product shape (rows, in, out, epilogue, residual or not; a model's warm-up run for the shapes
 * it warms), {@link GemmTuner} times on that stream, with the product's own operands and workspace, the library's
 * first {@link KernelOptions#TUNING_CANDIDATES} algorithms ({@link MatmulLibrary#candidates}; each with its
 * activation pass where the epilogue does not fuse it) and, for a product without a residual, gpupool's own kernels
 * for the shape, each measurement queued behind fills of the workspace so that the device time is the runs' own; the
 * library's first choice is kept unless another beats it clearly in a second comparison, and the product then runs
 * on the choice:
 * <pre>
 *   tuned: key ──► Tuned { winning plan (the measuring stream's own; other streams run twins of it, Matmul.twin)
 *                          | gpupool's kernels | nothing ran: the heuristic's choice;  GemmChoice for operators }
 * </pre>
 * A shape first seen while its stream captures a graph, with an output that aliases an input (the candidates run
 * repeatedly), or beyond {@link #MAX_TUNED_SHAPES}, runs the heuristic's choice unmeasured. Two streams measuring one
 * shape at once both finish; the first to store its choice serves both. {@link #gemmChoices()} lists the outcomes.
 */
final class LibraryGemm {

    /**
     * Shapes measured per instance at most; later new shapes run the heuristic's first choice, so that a workload of
     * ever new token counts does not keep timing on its requests' streams.
     */
    static final int MAX_TUNED_SHAPES = 1024;
    /**
     * Fills of the workspace each GEMM measurement starts behind, and their size: half a GiB of memset keeps the
     * device busy for longer than the host takes to enqueue a measurement's runs of a small product.
     */
    static final int TUNING_DELAY_FILLS = 16;
    static final long TUNING_DELAY_FILL_BYTES = 32L << 20;

    /** Logged under {@link CudaTensorOps}'s name: the name operators configure for the CUDA ops. */
    private static final System.Logger LOG = System.getLogger(CudaTensorOps.class.getName());

    /** Marks a shape the library has no algorithm for. */
    private static final Matmul DECLINED = marker("declined shape");
    /** Marks a shape whose measurement found gpupool's own kernels faster than the library. */
    private static final Matmul OWN_KERNELS = marker("a shape gpupool's kernels run");

    private final String deviceName;
    private final MatmulLibrary library;
    /** The per-stream workspaces, from the activation pool. */
    private final StreamWorkspaces workspaces;
    private final Precision precision;
    /** The library's compute type for the precision; null where it has none (then the library never multiplies). */
    private final Compute compute;
    private final ElementType elementType;
    /** {@link KernelOptions#tuneGemms()}. */
    private final boolean tuneGemms;
    private final GemmTuner tuner;
    /** gpupool's kernels: a tuning candidate, and the activation pass after an epilogue that does not apply it. */
    private final GemmKernels kernels;
    private final KernelLauncher launcher;
    private final Map<DeviceStream, LibraryStreamState> streams = new ConcurrentHashMap<>();
    /** Each measured shape's choice, by plan key; shared by all streams (see "Choosing per shape"). */
    private final Map<Long, Tuned> tuned = new ConcurrentHashMap<>();
    private volatile boolean closed;

    LibraryGemm(String deviceName, MatmulLibrary library, StreamWorkspaces workspaces, Precision precision,
                Compute compute, ElementType elementType, boolean tuneGemms, GemmTuner tuner, GemmKernels kernels,
                KernelLauncher launcher) {
        this.deviceName = deviceName;
        this.library = library;
        this.workspaces = workspaces;
        this.precision = precision;
        this.compute = compute;
        this.elementType = elementType;
        this.tuneGemms = tuneGemms;
        this.tuner = tuner;
        this.kernels = kernels;
        this.launcher = launcher;
    }

    /** Whether the library multiplies in this precision (TF32X3, and BF16 on FP32 activations, it cannot). */
    boolean multiplies() {
        return compute != null;
    }

    /** The library's description, e.g. "cuBLASLt 13.1.0". */
    String description() {
        return library.description();
    }

    StreamWorkspaces workspaces() {
        return workspaces;
    }

    /** The most workspace one product may need: the library's per-stream workspace. */
    long workspaceBound() {
        return library.workspaceBytes();
    }

    /**
     * One product {@code y = x·wᵀ + bias (+ residual unless it is 0, then only with activation NONE)} through the
     * library; false when this shape or these pointers are outside what the plans cover (the caller then uses the
     * kernels). Plans are keyed by (rows, in, out, residual or not, epilogue).
     */
    boolean product(DeviceStream stream, long x, long weight, long bias, long residual, long y, int rows, int in,
                    int out, Activation activation) {
        if (((x | weight | y | bias | residual) & 255) != 0 || rows >= 1 << 24 || in >= 1 << 16 || out >= 1 << 16) {
            return false;
        }
        boolean addsResidual = residual != 0;
        Epilogue epilogue = epilogue(bias != 0, activation);
        LibraryStreamState state = state(stream);
        long key = ((long) rows << 40) | ((long) in << 24) | ((long) out << 8) | (addsResidual ? 1 << 4 : 0)
                | epilogue.ordinal();
        Matmul plan = state.plans.get(key);
        if (plan == null) {
            plan = tuneGemms ? tunedPlan(stream, state, key, x, weight, bias, residual, y, rows, in, out, activation,
                    epilogue) : planOrDecline(rows, in, out, epilogue, addsResidual);
            state.plans.put(key, plan);
        }
        if (plan == DECLINED || plan == OWN_KERNELS) {
            return false;
        }
        plan.run(stream, x, weight, bias, residual, y, state.workspaceFor(plan, library, stream, workspaces));
        launcher.countLibraryCall();
        activationPass(stream, y, rows, out, epilogue, activation);
        return true;
    }

    /** The pass that applies {@code activation} after a product whose epilogue did not (see the class comment). */
    private void activationPass(DeviceStream stream, long y, int rows, int out, Epilogue epilogue,
                                Activation activation) {
        if (!fused(epilogue, activation)) {
            kernels.activate(stream, y, rows, out, activation);
        }
    }

    /**
     * This stream's plan for a shape under {@link KernelOptions#tuneGemms()}: the shape's measured choice (a twin of the
     * winning plan, or {@link #OWN_KERNELS}), measuring it first on this stream when no stream has; the heuristic's
     * first choice where the shape cannot be measured here (see "Choosing per shape").
     */
    private Matmul tunedPlan(DeviceStream stream, LibraryStreamState state, long key, long x, long weight, long bias,
                             long residual, long y, int rows, int in, int out, Activation activation,
                             Epilogue epilogue) {
        boolean addsResidual = residual != 0;
        Tuned choice = tuned.get(key);
        if (choice == null) {
            if (stream.capturing() || y == x || y == residual || tuned.size() >= MAX_TUNED_SHAPES) {
                return planOrDecline(rows, in, out, epilogue, addsResidual);
            }
            Tuned measured = measure(stream, state, x, weight, bias, residual, y, rows, in, out, activation, epilogue);
            Tuned earlier = tuned.putIfAbsent(key, measured);
            if (earlier == null) {
                return measured.plan == null ? measured.fallback(this, rows, in, out, epilogue, addsResidual)
                        : measured.plan;   // this stream keeps the measured plan itself
            }
            if (measured.plan != null) {
                measured.plan.close();   // another stream measured the shape meanwhile: its choice serves all
            }
            choice = earlier;
        }
        if (choice.plan == null) {
            return choice.fallback(this, rows, in, out, epilogue, addsResidual);
        }
        try {
            return choice.plan.twin();
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.DEBUG, "{0}: no twin of the measured plan for {1} ({2}); the heuristic''s "
                    + "first choice runs on {3}", deviceName, choice.report.shape(), e.getMessage(), stream);
            return planOrDecline(rows, in, out, epilogue, addsResidual);
        }
    }

    /**
     * Times the library's candidates and, for a product without a residual, gpupool's own kernels, on {@code stream}
     * with the caller's operands, and keeps the winner (closing the other plans). A candidate needing more workspace
     * than the stream has, or one that fails, is left out; when nothing ran, the shape keeps the heuristic's choice.
     */
    private Tuned measure(DeviceStream stream, LibraryStreamState state, long x, long weight, long bias, long residual,
                          long y, int rows, int in, int out, Activation activation, Epilogue epilogue) {
        boolean addsResidual = residual != 0;
        String shape = rows + "x" + in + "->" + out + " " + precision + " " + epilogue
                + (addsResidual ? " + residual" : "");
        // first, as the product itself would: a pool that cannot give the stream its workspace fails the request
        long workspace = state.tuningWorkspace(stream, workspaces);
        long workspaceBytes = workspace == 0 ? 0 : state.pinned ? state.pinnedBytes : library.workspaceBytes();
        List<Matmul> offered;
        try {
            offered = library.candidates(rows, in, out, elementType, compute, epilogue, addsResidual,
                    KernelOptions.TUNING_CANDIDATES);
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.DEBUG, "{0}: {1} offers no algorithm for {2} ({3})", deviceName,
                    library.description(), shape, e.getMessage());
            offered = List.of();
        }
        List<Matmul> plans = new ArrayList<>();
        List<GemmTuner.Candidate> candidates = new ArrayList<>();
        for (Matmul plan : offered) {
            long need = library.workspaceBytes(plan);
            if (need > workspaceBytes) {
                LOG.log(System.Logger.Level.DEBUG, "{0}: {1} {2} needs {3} bytes of workspace, {4} has {5}; skipped",
                        shape, library.description(), plan.algorithm(), need, stream, workspaceBytes);
                plan.close();
                continue;
            }
            long scratch = need == 0 ? 0 : workspace;
            plans.add(plan);
            candidates.add(new GemmTuner.Candidate(library.description() + " " + plan.algorithm(), () -> {
                plan.run(stream, x, weight, bias, residual, y, scratch);
                activationPass(stream, y, rows, out, epilogue, activation);
            }));
        }
        boolean heuristicOffered = !plans.isEmpty() && plans.getFirst() == offered.getFirst();
        if (!addsResidual) {
            candidates.add(new GemmTuner.Candidate(
                    GemmEngine.OWN_NAME + " (" + kernels.kernelName(rows, in, out) + ")",
                    () -> kernels.linear(stream, x, weight, bias, y, rows, in, out, activation)));
        }
        GemmTuner.Measured measured = tuner.choose(stream, shape, candidates, delay(stream, workspace, workspaceBytes));
        int winner = measured.winner();
        Matmul kept = winner >= 0 && winner < plans.size() ? plans.get(winner) : null;
        for (Matmul plan : plans) {
            if (plan != kept) {
                plan.close();
            }
        }
        boolean own = winner >= 0 && winner == plans.size();
        String engine = winner < 0 ? "heuristic (no candidate ran)" : candidates.get(winner).engine();
        GemmChoice report = new GemmChoice(shape, engine, measured.winnerMillis(),
                heuristicOffered ? measured.millis()[0] : Double.NaN, candidates.size());
        // debug: a workload of ever new token counts measures a shape per new count (the endpoint lists them all)
        LOG.log(System.Logger.Level.DEBUG, "{0}: {1} runs on {2} ({3} ms; the heuristic''s first {4} ms; {5} candidates)",
                deviceName, shape, engine, String.format(java.util.Locale.ROOT, "%.4f", report.millis()),
                String.format(java.util.Locale.ROOT, "%.4f", report.heuristicMillis()), candidates.size());
        return new Tuned(kept, own, report);
    }

    /**
     * What a measurement starts behind ({@link GemmTuner}): {@link #TUNING_DELAY_FILLS} fills of the stream's
     * workspace, scratch no product of the stream reads before writing it, so the device is busy for longer than
     * the host takes to enqueue the measured runs; nothing without a workspace.
     */
    private static Runnable delay(DeviceStream stream, long workspace, long workspaceBytes) {
        long bytes = Math.min(workspaceBytes, TUNING_DELAY_FILL_BYTES);
        if (workspace == 0 || bytes == 0) {
            return () -> { };
        }
        return () -> {
            for (int i = 0; i < TUNING_DELAY_FILLS; i++) {
                stream.fill(workspace, (byte) 0, bytes);
            }
        };
    }

    /** The measured choices so far, in no particular order. */
    List<GemmChoice> gemmChoices() {
        return tuned.values().stream().map(t -> t.report).toList();
    }

    /**
     * One shape's measured choice: {@code plan} the winning library plan (owned by the stream that measured it; other
     * streams run twins of it), or null when gpupool's kernels won ({@code own}) or nothing ran.
     */
    private record Tuned(Matmul plan, boolean own, GemmChoice report) {

        /** A stream's plan when no library plan won: {@link #OWN_KERNELS}, or the heuristic's own choice. */
        Matmul fallback(LibraryGemm gemm, int rows, int in, int out, Epilogue epilogue, boolean addsResidual) {
            return own ? OWN_KERNELS : gemm.planOrDecline(rows, in, out, epilogue, addsResidual);
        }
    }

    /**
     * A plan for this shape, or {@link #DECLINED} (logged once per shape and stream) where the library offers no
     * algorithm: the product then runs on gpupool's kernels.
     */
    private Matmul planOrDecline(int rows, int in, int out, Epilogue epilogue, boolean addsResidual) {
        try {
            return addsResidual ? library.planResidual(rows, in, out, elementType, compute, epilogue)
                    : library.plan(rows, in, out, elementType, compute, epilogue);
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.INFO, "{0}: {1} declines {2}x{3} -> {4} {5}{6}; gpupool''s kernels run it ({7})",
                    deviceName, library.description(), rows, in, out, epilogue,
                    addsResidual ? " + residual" : "", e.getMessage());
            return DECLINED;
        }
    }

    /** The library epilogue for a bias (present or not) and an activation; see the class comment. */
    private Epilogue epilogue(boolean bias, Activation activation) {
        if (!bias) {
            return Epilogue.NONE;
        }
        return switch (activation) {
            case GELU -> compute == Compute.FP32 ? Epilogue.BIAS : Epilogue.BIAS_GELU;
            case RELU -> Epilogue.BIAS_RELU;
            default -> Epilogue.BIAS;
        };
    }

    private static boolean fused(Epilogue epilogue, Activation activation) {
        return switch (activation) {
            case NONE -> true;
            case GELU -> epilogue == Epilogue.BIAS_GELU;
            case RELU -> epilogue == Epilogue.BIAS_RELU;
            case TANH -> false;
        };
    }

    private LibraryStreamState state(DeviceStream stream) {
        LibraryStreamState state = streams.get(stream);
        if (state != null) {
            return state;
        }
        checkOpen();
        LibraryStreamState fresh = new LibraryStreamState(true);         // first product on this stream
        streams.put(stream, fresh);
        return fresh;
    }

    private void checkOpen() {
        if (closed) {
            throw new IllegalStateException("CUDA tensor ops of " + deviceName + " are closed");
        }
    }

    private static Matmul marker(String what) {
        return new Matmul() {
            @Override
            public void run(DeviceStream stream, long x, long w, long bias, long residual, long y, long workspace) {
                throw new IllegalStateException(what);
            }

            @Override
            public void close() {
            }
        };
    }

    /** Most workspace a product on {@code stream} needed since its workspace was last pinned; 0 for a stream unseen. */
    long workspaceNeeded(DeviceStream stream) {
        LibraryStreamState state = streams.get(stream);
        return state == null ? 0 : state.neededSincePinned;
    }

    /** See {@link CudaTensorOps#useWorkspace}. */
    void useWorkspace(DeviceStream stream, long address, long bytes) {
        if (address != 0 && ((address & 255) != 0 || bytes < 0)) {
            throw new IllegalArgumentException("a workspace must be 256-byte aligned with a size >= 0, got 0x"
                    + Long.toHexString(address) + ", " + bytes + " bytes");
        }
        checkOpen();
        streams.computeIfAbsent(stream, s -> new LibraryStreamState(false)).pin(address, bytes);
    }

    /** Frees every plan and gives the workspaces back to the pool, collecting failures into {@code failures}. */
    void close(List<RuntimeException> failures) {
        closed = true;
        for (LibraryStreamState state : streams.values()) {
            state.plans.forEach(plan -> {
                if (plan == DECLINED || plan == OWN_KERNELS) {
                    return;
                }
                try {
                    plan.close();
                } catch (RuntimeException e) {
                    failures.add(e);
                }
            });
        }
        streams.clear();
        tuned.clear();
        try {
            workspaces.close();
        } catch (RuntimeException e) {
            failures.add(e);
        }
    }
}
