package io.gpupool.backend;

import java.util.List;

/**
 * Dense matrix products from a vendor library (cuBLASLt on CUDA), for the linear layers. The kernels layer sees
 * only this interface; the binding stays in its backend.
 *
 * <p>One {@link Matmul} is planned per shape (the library's heuristic picks its algorithm once) and then run
 * many times. A plan keeps per-call scratch (the bias pointer it hands the library), so it belongs to one stream
 * at a time, as a stream belongs to one request at a time: callers keep plans per stream.
 *
 * <p>Layouts are row-major as everywhere in gpupool: {@code y[rows, out] = epilogue(x[rows, in] · w[out, in]ᵀ +
 * bias[out])}, all three matrices packed (leading dimension = row length).
 */
public interface MatmulLibrary {

    /** Element type of x, w, bias and y (all four alike). */
    enum ElementType { FP32, BF16 }

    /**
     * How products are formed. FP32: single precision FMA, no tensor cores (exact to rounding). TF32: FP32 data
     * through the tensor cores with 10-bit mantissas. BF16: bf16 data through the tensor cores. All accumulate in
     * FP32.
     */
    enum Compute { FP32, TF32, BF16 }

    /**
     * What the library applies to the product before storing it. GELU here is the library's own (the tanh
     * approximation on cuBLASLt), within bf16/TF32 rounding of the erf form but not within FP32 rounding.
     */
    enum Epilogue { NONE, BIAS, BIAS_GELU, BIAS_RELU }

    /** Library and version, e.g. "cuBLASLt 13.1.0" (shown as the model's GEMM engine). */
    String description();

    /** Workspace bytes a plan may use at most; the caller provides that much device memory per stream. */
    long workspaceBytes();

    /**
     * Workspace bytes {@code plan} (one of this library's) uses, at most {@link #workspaceBytes()}: what its chosen
     * algorithm needs, so that scratch of exactly this size can be given to a captured graph. The default claims
     * the whole bound.
     */
    default long workspaceBytes(Matmul plan) {
        return workspaceBytes();
    }

    /**
     * Plans {@code y[rows, out] = epilogue(x · wᵀ + bias)}. Fails (naming the library call and its status) where
     * the library offers no algorithm for the combination.
     */
    Matmul plan(int rows, int in, int out, ElementType type, Compute compute, Epilogue epilogue);

    /**
     * Plans {@code y[rows, out] = x · wᵀ + bias + residual[rows, out]} (epilogue {@link Epilogue#BIAS}, or
     * {@link Epilogue#NONE} without a bias): the residual connection added in the product's own epilogue, so that a
     * transformer's output projection needs no separate add. {@code residual} may differ from {@code y} (the library
     * reads it as its C operand with beta = 1) and is laid out as y. Fails as {@link #plan} does, and for an
     * activation epilogue (the activation would apply to the sum).
     */
    Matmul planResidual(int rows, int in, int out, ElementType type, Compute compute, Epilogue epilogue);

    /**
     * Up to {@code count} plans of one shape ({@link #plan}, or {@link #planResidual} when {@code residual}), one per
     * algorithm the library offers for it, in the library's own order of preference: the first is the plan
     * {@link #plan} makes. For measuring the algorithms against each other at warm-up; the caller closes every plan.
     * Fails as {@link #plan} does where the library offers none. The default offers the one plan.
     */
    default List<Matmul> candidates(int rows, int in, int out, ElementType type, Compute compute,
                                              Epilogue epilogue, boolean residual, int count) {
        return List.of(residual ? planResidual(rows, in, out, type, compute, epilogue)
                : plan(rows, in, out, type, compute, epilogue));
    }

    /** A planned product; owned by one stream at a time (see the class comment). */
    interface Matmul extends AutoCloseable {

        /** The algorithm this plan runs, in a few words for the operator (e.g. "algo 66 tile 20 splitK 1"). */
        default String algorithm() {
            return "heuristic's first";
        }

        /**
         * A plan of the same shape and algorithm with per-call scratch of its own, for another stream: how one
         * stream's measured choice serves every stream. Libraries that cannot copy a plan say so by throwing
         * {@link UnsupportedOperationException} (the caller then plans anew).
         */
        default Matmul twin() {
            throw new UnsupportedOperationException("this library cannot copy a plan");
        }

        /**
         * Enqueues the product on {@code stream}; {@code bias} is ignored by {@link Epilogue#NONE}, required by
         * the others. {@code workspace} is device memory of at least {@link MatmulLibrary#workspaceBytes(Matmul)}
         * bytes that no other stream (and no other captured graph) uses concurrently. A plan from
         * {@link #planResidual} needs {@link #run(DeviceStream, long, long, long, long, long, long)} instead.
         */
        default void run(DeviceStream stream, long x, long w, long bias, long y, long workspace) {
            run(stream, x, w, bias, 0, y, workspace);
        }

        /**
         * As {@link #run(DeviceStream, long, long, long, long, long)}, adding {@code residual}: required (a device
         * address) by a plan from {@link #planResidual}, and 0 for every other plan.
         */
        void run(DeviceStream stream, long x, long w, long bias, long residual, long y, long workspace);

        /** Frees the plan's descriptors. */
        @Override
        void close();
    }
}
