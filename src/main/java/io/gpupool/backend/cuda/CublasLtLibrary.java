package io.gpupool.backend.cuda;

import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.MatmulLibrary;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * {@link MatmulLibrary} on one CUDA device through cuBLASLt: one library handle per device, one descriptor set
 * and algorithm per {@link Matmul} plan.
 *
 * <h2>Row-major through a column-major library</h2>
 * cuBLASLt reads matrices column-major. A row-major {@code [r, c]} matrix is the column-major {@code [c, r]} one,
 * so {@code y[rows,out] = x[rows,in] · w[out,in]ᵀ} is asked as the column-major {@code D = op(A) · B} with
 * <pre>
 *   A = w  as in × out  (ld in),   op(A) = Aᵀ  (out × in)
 *   B = x  as in × rows (ld in),   op(B) = B
 *   D = y  as out × rows (ld out)  = row-major y[rows, out];   C = D with beta = 0
 * </pre>
 * and the bias, broadcast along D's columns, is one value per output feature, as a linear layer wants. A residual
 * plan ({@link #planResidual}) passes the residual as C with beta = 1 and C's layout = D's: cuBLASLt computes
 * {@code D = alpha·op(A)·op(B) + beta·C} and then adds the bias in its epilogue, and allows C and D to be different
 * matrices of one type and shape (out of place), so {@code y = x·wᵀ + bias + residual} is one call.
 *
 * <h2>Precision</h2>
 * {@link Compute#FP32} uses CUBLAS_COMPUTE_32F with FP32 data (no TF32: the library only uses tensor cores for
 * FP32 data under a FAST compute type); {@link Compute#TF32} CUBLAS_COMPUTE_32F_FAST_TF32; {@link Compute#BF16}
 * bf16 data with CUBLAS_COMPUTE_32F (bf16 tensor cores, FP32 accumulation). The scale type is FP32 throughout.
 *
 * <h2>Plans and the workspace</h2>
 * A plan asks the heuristic once for its shape and keeps the best algorithm (64 opaque bytes), the descriptors and
 * the host scalars (alpha = 1, beta = 0, the bias pointer slot) in native memory of its own, so a run allocates
 * nothing. The heuristic is told the workspace bound {@link #workspaceBytes()} and the operands' alignment; the
 * caller passes a workspace of that size that stays at one address per stream. Each call is told the workspace its
 * algorithm needs (the heuristic result's {@code workspaceSize}, {@link #workspaceBytes(Matmul)}), so a captured CUDA
 * graph can be given scratch of just that size inside its own memory. {@link #candidates} asks the heuristic for
 * several results at once and makes one plan per usable result, so a caller can time them; {@link Matmul#twin}
 * copies a plan's result into fresh descriptors, so the algorithm measured fastest on one stream runs on all.
 */
final class CublasLtLibrary implements MatmulLibrary {

    private static final System.Logger LOG = System.getLogger(CublasLtLibrary.class.getName());

    private final CudaDevice device;
    private final LibCublasLt lib;
    private final long handle;
    private final long workspaceBytes;
    private final String description;
    private boolean closed;

    CublasLtLibrary(CudaDevice device, LibCublasLt lib, long workspaceBytes) {
        this.device = device;
        this.lib = lib;
        this.workspaceBytes = workspaceBytes;
        device.makeCurrent();
        this.handle = lib.createHandle();
        this.description = lib.description();
    }

    @Override
    public String description() {
        return description;
    }

    @Override
    public long workspaceBytes() {
        return workspaceBytes;
    }

    /** What the heuristic's algorithm of {@code plan} needs (its result's workspaceSize). */
    @Override
    public long workspaceBytes(Matmul plan) {
        if (!(plan instanceof Plan own) || own.library() != this) {
            throw new IllegalArgumentException("not a plan of " + description + ": " + plan);
        }
        return own.algorithmWorkspace;
    }

    @Override
    public Matmul plan(int rows, int in, int out, ElementType type, Compute compute, Epilogue epilogue) {
        return plan(rows, in, out, type, compute, epilogue, false);
    }

    @Override
    public Matmul planResidual(int rows, int in, int out, ElementType type, Compute compute, Epilogue epilogue) {
        if (epilogue != Epilogue.NONE && epilogue != Epilogue.BIAS) {
            throw new IllegalArgumentException("a residual product takes epilogue NONE or BIAS, got " + epilogue);
        }
        return plan(rows, in, out, type, compute, epilogue, true);
    }

    private Plan plan(int rows, int in, int out, ElementType type, Compute compute, Epilogue epilogue,
                      boolean residual) {
        check(rows, in, out, type, compute);
        device.makeCurrent();
        return new Plan(rows, in, out, type, compute, epilogue, residual, null, 1);
    }

    /**
     * The heuristic's first {@code count} results for the shape, each as a plan of its own; a result the library
     * marks unusable, or whose descriptors cannot be made, is left out (logged at debug).
     */
    @Override
    public List<Matmul> candidates(int rows, int in, int out, ElementType type, Compute compute, Epilogue epilogue,
                                   boolean residual, int count) {
        if (residual && epilogue != Epilogue.NONE && epilogue != Epilogue.BIAS) {
            throw new IllegalArgumentException("a residual product takes epilogue NONE or BIAS, got " + epilogue);
        }
        if (count < 1) {
            throw new IllegalArgumentException("count must be at least 1, got " + count);
        }
        check(rows, in, out, type, compute);
        device.makeCurrent();
        Plan first = new Plan(rows, in, out, type, compute, epilogue, residual, null, count);
        List<Matmul> plans = new ArrayList<>();
        plans.add(first);
        for (int i = 1; i < first.offered; i++) {
            MemorySegment result = first.results.asSlice(i * LibCublasLt.HEURISTIC_RESULT_BYTES,
                    LibCublasLt.HEURISTIC_RESULT_BYTES);
            if (result.get(JAVA_INT, LibCublasLt.HEURISTIC_STATE_OFFSET) != LibCublasLt.STATUS_SUCCESS) {
                continue;
            }
            try {
                plans.add(new Plan(rows, in, out, type, compute, epilogue, residual, result, 0));
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.DEBUG, "{0}: heuristic result {1} of {2} left out: {3}", description, i,
                        first.detail, e.getMessage());
            }
        }
        return plans;
    }

    private static void check(int rows, int in, int out, ElementType type, Compute compute) {
        if (rows <= 0 || in <= 0 || out <= 0) {
            throw new IllegalArgumentException("matmul dimensions must be positive, got rows " + rows + ", in " + in
                    + ", out " + out);
        }
        if (type == ElementType.BF16 != (compute == Compute.BF16)) {
            throw new IllegalArgumentException("compute " + compute + " does not apply to " + type + " data");
        }
    }

    /** Destroys the library handle; plans must be closed first. */
    synchronized void close() {
        if (!closed) {
            closed = true;
            device.makeCurrent();
            lib.destroyHandle(handle);
        }
    }

    private final class Plan implements Matmul {

        private final int rows;
        private final int in;
        private final int out;
        private final ElementType type;
        private final Compute compute;
        private final Epilogue epilogue;
        private final String detail;
        private final Arena arena = Arena.ofShared();
        private final MemorySegment scalars = arena.allocate(16, 16);
        private final MemorySegment biasSlot = arena.allocate(JAVA_LONG);
        /** The heuristic result this plan runs (its algorithm and workspace size); never written after planning. */
        private final MemorySegment algo = arena.allocate(LibCublasLt.HEURISTIC_RESULT_BYTES, 16);
        /** Every result the heuristic offered when this plan asked it (null for a plan given its algorithm). */
        private final MemorySegment results;
        /** How many results {@link #results} holds (0 for a plan given its algorithm). */
        private final int offered;
        private final long desc;
        private final long aLayout;
        private final long bLayout;
        private final long dLayout;
        private final boolean bias;
        /** Whether C is a residual read with beta = 1 (else C = D with beta = 0, never read). */
        private final boolean residual;
        /** Workspace the chosen algorithm needs; passed as the call's workspace size. */
        private final long algorithmWorkspace;
        private boolean planClosed;

        /**
         * Makes the descriptors; then runs {@code chosen} (a heuristic result, copied) or, when null, asks the
         * heuristic for up to {@code ask} results and runs the first.
         */
        Plan(int rows, int in, int out, ElementType type, Compute compute, Epilogue epilogue, boolean residual,
             MemorySegment chosen, int ask) {
            this.rows = rows;
            this.in = in;
            this.out = out;
            this.type = type;
            this.compute = compute;
            this.epilogue = epilogue;
            this.detail = rows + "x" + in + " -> " + out + " " + type + "/" + compute + " " + epilogue
                    + (residual ? " + residual" : "");
            this.bias = epilogue != Epilogue.NONE;
            this.residual = residual;
            scalars.set(JAVA_FLOAT, 0, 1f);
            scalars.set(JAVA_FLOAT, 4, residual ? 1f : 0f);
            int dataType = type == ElementType.BF16 ? LibCublasLt.R_16BF : LibCublasLt.R_32F;
            int computeType = compute == Compute.TF32 ? LibCublasLt.COMPUTE_32F_FAST_TF32 : LibCublasLt.COMPUTE_32F;
            long d0 = 0;
            long a0 = 0;
            long b0 = 0;
            long y0 = 0;
            long preference = 0;
            MemorySegment offeredResults = null;
            int offeredCount = 0;
            try {
                d0 = lib.createDesc(computeType, LibCublasLt.R_32F, detail);
                setDesc(d0, LibCublasLt.DESC_TRANSA, LibCublasLt.OP_T);
                setDesc(d0, LibCublasLt.DESC_TRANSB, LibCublasLt.OP_N);
                setDesc(d0, LibCublasLt.DESC_EPILOGUE, switch (epilogue) {
                    case NONE -> LibCublasLt.EPILOGUE_DEFAULT;
                    case BIAS -> LibCublasLt.EPILOGUE_BIAS;
                    case BIAS_GELU -> LibCublasLt.EPILOGUE_GELU_BIAS;
                    case BIAS_RELU -> LibCublasLt.EPILOGUE_RELU_BIAS;
                });
                if (bias) {
                    // the heuristic reads the bias pointer's alignment: a 256-aligned placeholder, as pool blocks are
                    biasSlot.set(JAVA_LONG, 0, 256L);
                    lib.check("cublasLtMatmulDescSetAttribute(BIAS_POINTER)", lib.setDescAttribute(d0,
                            LibCublasLt.DESC_BIAS_POINTER, biasSlot.address(), 8), detail);
                }
                a0 = lib.createLayout(dataType, in, out, in, detail);
                b0 = lib.createLayout(dataType, in, rows, in, detail);
                y0 = lib.createLayout(dataType, out, rows, out, detail);
                if (chosen != null) {
                    MemorySegment.copy(chosen, 0, algo, 0, LibCublasLt.HEURISTIC_RESULT_BYTES);
                } else {
                    preference = lib.createPreference();
                    MemorySegment value = arena.allocate(JAVA_LONG);
                    value.set(JAVA_LONG, 0, workspaceBytes);
                    lib.check("cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)", lib.setPreferenceAttribute(
                            preference, LibCublasLt.PREF_MAX_WORKSPACE_BYTES, value.address(), 8), detail);
                    offeredResults = arena.allocate(ask * LibCublasLt.HEURISTIC_RESULT_BYTES, 16);
                    offeredCount = lib.heuristic(handle, d0, a0, b0, y0, y0, preference, ask, offeredResults, detail);
                    if (offeredCount < 1
                            || offeredResults.get(JAVA_INT, LibCublasLt.HEURISTIC_STATE_OFFSET) != 0) {
                        throw new CublasException("cublasLtMatmulAlgoGetHeuristic", LibCublasLt.STATUS_NOT_SUPPORTED,
                                lib.statusName(LibCublasLt.STATUS_NOT_SUPPORTED), "no algorithm for " + detail);
                    }
                    MemorySegment.copy(offeredResults, 0, algo, 0, LibCublasLt.HEURISTIC_RESULT_BYTES);
                }
            } catch (RuntimeException | Error e) {
                if (preference != 0) {
                    lib.destroyPreference(preference);
                }
                destroyAll(d0, a0, b0, y0);
                arena.close();
                throw e;
            }
            if (preference != 0) {
                lib.destroyPreference(preference);
            }
            results = offeredResults;
            offered = offeredCount;
            algorithmWorkspace = Math.min(workspaceBytes, algo.get(JAVA_LONG, LibCublasLt.HEURISTIC_WORKSPACE_OFFSET));
            desc = d0;
            aLayout = a0;
            bLayout = b0;
            dLayout = y0;
        }

        CublasLtLibrary library() {
            return CublasLtLibrary.this;
        }

        @Override
        public String algorithm() {
            long at = algo.address();
            return "algo " + lib.algoConfig(at, LibCublasLt.ALGO_CONFIG_ID) + " tile "
                    + lib.algoConfig(at, LibCublasLt.ALGO_CONFIG_TILE_ID) + " splitK "
                    + lib.algoConfig(at, LibCublasLt.ALGO_CONFIG_SPLITK_NUM) + " stages "
                    + lib.algoConfig(at, LibCublasLt.ALGO_CONFIG_STAGES_ID);
        }

        /** Same shape, same heuristic result, descriptors and scratch of its own. */
        @Override
        public Matmul twin() {
            synchronized (this) {
                if (planClosed) {
                    throw new IllegalStateException("plan " + detail + " is closed");
                }
                device.makeCurrent();
                return new Plan(rows, in, out, type, compute, epilogue, residual, algo, 0);
            }
        }

        private void setDesc(long d, int attribute, int value) {
            MemorySegment slot = arena.allocate(JAVA_INT);
            slot.set(JAVA_INT, 0, value);
            lib.check("cublasLtMatmulDescSetAttribute(" + attribute + ")",
                    lib.setDescAttribute(d, attribute, slot.address(), 4), detail);
        }

        @Override
        public void run(DeviceStream stream, long x, long w, long biasAddress, long residualAddress, long y,
                        long workspace) {
            if (residual != (residualAddress != 0)) {
                throw new IllegalArgumentException(residual ? "residual must be a device address for " + detail
                        : "a residual was given to " + detail + ", planned without one");
            }
            if (bias) {
                if (biasAddress == 0) {
                    throw new IllegalArgumentException("bias must be a device address for " + detail);
                }
                if (biasSlot.get(JAVA_LONG, 0) != biasAddress) {
                    biasSlot.set(JAVA_LONG, 0, biasAddress);
                    lib.check("cublasLtMatmulDescSetAttribute(BIAS_POINTER)", lib.setDescAttribute(desc,
                            LibCublasLt.DESC_BIAS_POINTER, biasSlot.address(), 8), detail);
                }
            }
            CudaStream cuda = (CudaStream) stream;
            device.makeCurrent();
            long scalarBase = scalars.address();
            long c = residual ? residualAddress : y;
            int status = lib.matmul(handle, desc, scalarBase, w, aLayout, x, bLayout, scalarBase + 4, c, dLayout,
                    y, dLayout, algo.address(), workspace, workspace == 0 ? 0 : algorithmWorkspace, cuda.nativeHandle());
            if (status != LibCublasLt.STATUS_SUCCESS) {
                lib.check("cublasLtMatmul", status, detail + " on " + device.label() + " stream " + cuda.ordinal());
            }
        }

        @Override
        public synchronized void close() {
            if (!planClosed) {
                planClosed = true;
                device.makeCurrent();
                destroyAll(desc, aLayout, bLayout, dLayout);
                arena.close();
            }
        }

        private void destroyAll(long d, long a, long b, long y) {
            if (d != 0) {
                lib.destroyDesc(d);
            }
            for (long layout : new long[]{a, b, y}) {
                if (layout != 0) {
                    lib.destroyLayout(layout);
                }
            }
        }
    }
}
