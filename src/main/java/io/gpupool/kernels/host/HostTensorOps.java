package io.gpupool.kernels.host;

import io.gpupool.backend.DeviceStream;
import io.gpupool.kernels.TensorOps;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.stream.IntStream;

/**
 * {@link TensorOps} in plain Java for the host backend, where a "device address" is a native
 * address in this process. Every op is enqueued with {@link DeviceStream#enqueueHostTask}, so it
 * runs in stream order on the stream's worker; inside, the heavy ops (linear, attention) split
 * their work over the common {@link java.util.concurrent.ForkJoinPool}.
 *
 * <h2>GEMM (linear)</h2>
 * y[rows, out] = act(x[rows, in] · Wᵀ + bias), W stored [out, in] as PyTorch stores it.
 * <pre>
 *   1. transpose W once per call into Wt[in, out] (a heap array), so that for fixed k the
 *      outputs j are contiguous: the inner loop  acc[j] += x[r,k] · Wt[k, j]  is a stride-1
 *      AXPY the JIT turns into SIMD;
 *      (transposed in TRANSPOSE_BLOCK² squares to stay in cache);
 *   2. cut y into tiles of ROWS_PER_TILE rows × COLS_PER_TILE columns:
 *
 *          Wt (in × out)          columns jb .. jb+COLS_PER_TILE
 *            +------+------+         |
 *          x +------+------+   y  +--+---+------+
 *     rows r |......|      |      |  |###|      |  tile (r, jb): 4 accumulator rows of
 *            +------+------+      +--+---+------+  COLS_PER_TILE floats (4 × 1 KiB, stay in L1)
 *
 *   3. per tile, walk k = 0..in-1 once: load x[r..r+3, k] (4 scalars), stream Wt's row-slice
 *      k and update the 4 accumulator rows (each Wt element loaded once serves 4 rows);
 *   4. add the bias (accumulators start at it), apply the activation, store the tile;
 *   5. tiles are independent: run them in parallel when the product is big enough to pay.
 * </pre>
 * GELU is the erf form, 0.5·x·(1 + erf(x/√2)), with {@link #erf} accurate to about 1e-15.
 */
public final class HostTensorOps implements TensorOps {

    private static final ValueLayout.OfFloat F = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ValueLayout.OfInt I = ValueLayout.JAVA_INT_UNALIGNED;

    static final int ROWS_PER_TILE = 4;
    static final int COLS_PER_TILE = 256;
    static final int TRANSPOSE_BLOCK = 64;
    /** Multiply-adds below which a GEMM runs on the calling thread alone. */
    static final long PARALLEL_THRESHOLD = 1L << 18;

    private static final double SQRT_PI = Math.sqrt(Math.PI);
    private static final double TWO_OVER_SQRT_PI = 2.0 / SQRT_PI;
    private static final float INV_SQRT2 = (float) (1.0 / Math.sqrt(2.0));

    private static MemorySegment at(long address, long bytes) {
        return MemorySegment.ofAddress(address).reinterpret(bytes);
    }

    private static MemorySegment floats(long address, long count) {
        return at(address, count * Float.BYTES);
    }

    @Override
    public void embeddingSum(DeviceStream stream, long inputIds, long tokenTypeIds, long wordTable, long positionTable,
                             long tokenTypeTable, long out, int batch, int seq, int hidden) {
        stream.enqueueHostTask(() -> {
            long tokens = (long) batch * seq;
            MemorySegment ids = at(inputIds, tokens * Integer.BYTES);
            MemorySegment types = tokenTypeIds == 0 ? null : at(tokenTypeIds, tokens * Integer.BYTES);
            MemorySegment y = floats(out, tokens * hidden);
            MemorySegment pos = floats(positionTable, (long) seq * hidden);
            for (long t = 0; t < tokens; t++) {
                int s = (int) (t % seq);
                int id = ids.getAtIndex(I, t);
                int type = types == null ? 0 : types.getAtIndex(I, t);
                MemorySegment word = floats(wordTable + (long) id * hidden * Float.BYTES, hidden);
                MemorySegment tt = floats(tokenTypeTable + (long) type * hidden * Float.BYTES, hidden);
                long row = t * hidden;
                long posRow = (long) s * hidden;
                for (int c = 0; c < hidden; c++) {
                    y.setAtIndex(F, row + c, word.getAtIndex(F, c) + pos.getAtIndex(F, posRow + c) + tt.getAtIndex(F, c));
                }
            }
        });
    }

    @Override
    public void linear(DeviceStream stream, long x, long weight, long bias, long y, int rows, int in, int out,
                       Activation activation) {
        stream.enqueueHostTask(() -> gemm(floats(x, (long) rows * in), floats(weight, (long) out * in),
                bias == 0 ? null : floats(bias, out), floats(y, (long) rows * out), rows, in, out, activation));
    }

    /** The GEMM described in the class comment; public for tests and benchmarks. */
    public static void gemm(MemorySegment x, MemorySegment weight, MemorySegment bias, MemorySegment y,
                            int rows, int in, int out, Activation activation) {
        float[] wt = new float[in * out];
        // Blocked transpose: a TRANSPOSE_BLOCK² square of W is read row-wise and written column-wise
        // while both stay in L1, instead of striding through all of Wt for every row of W.
        for (int o0 = 0; o0 < out; o0 += TRANSPOSE_BLOCK) {
            int o1 = Math.min(out, o0 + TRANSPOSE_BLOCK);
            for (int k0 = 0; k0 < in; k0 += TRANSPOSE_BLOCK) {
                int k1 = Math.min(in, k0 + TRANSPOSE_BLOCK);
                for (int o = o0; o < o1; o++) {
                    long base = (long) o * in;
                    for (int k = k0; k < k1; k++) {
                        wt[k * out + o] = weight.getAtIndex(F, base + k);
                    }
                }
            }
        }
        float[] b = new float[out];
        if (bias != null) {
            MemorySegment.copy(bias, F, 0, b, 0, out);
        }
        int rowTiles = (rows + ROWS_PER_TILE - 1) / ROWS_PER_TILE;
        int colTiles = (out + COLS_PER_TILE - 1) / COLS_PER_TILE;
        int tiles = rowTiles * colTiles;
        IntStream range = IntStream.range(0, tiles);
        if ((long) rows * in * out >= PARALLEL_THRESHOLD && tiles > 1) {
            range = range.parallel();
        }
        range.forEach(tile -> gemmTile(x, wt, b, y, rows, in, out, activation,
                (tile / colTiles) * ROWS_PER_TILE, (tile % colTiles) * COLS_PER_TILE));
    }

    private static void gemmTile(MemorySegment x, float[] wt, float[] bias, MemorySegment y, int rows, int in,
                                 int out, Activation activation, int r0, int j0) {
        int nr = Math.min(ROWS_PER_TILE, rows - r0);
        int nc = Math.min(COLS_PER_TILE, out - j0);
        // Four accumulator rows, one Wt load feeding four multiply-adds.
        float[] c0 = new float[COLS_PER_TILE];
        float[] c1 = new float[COLS_PER_TILE];
        float[] c2 = new float[COLS_PER_TILE];
        float[] c3 = new float[COLS_PER_TILE];
        System.arraycopy(bias, j0, c0, 0, nc);
        System.arraycopy(bias, j0, c1, 0, nc);
        System.arraycopy(bias, j0, c2, 0, nc);
        System.arraycopy(bias, j0, c3, 0, nc);
        long x0 = (long) r0 * in;
        long x1 = nr > 1 ? x0 + in : x0;
        long x2 = nr > 2 ? x0 + 2L * in : x0;
        long x3 = nr > 3 ? x0 + 3L * in : x0;
        for (int k = 0; k < in; k++) {
            float a0 = x.getAtIndex(F, x0 + k);
            float a1 = x.getAtIndex(F, x1 + k);
            float a2 = x.getAtIndex(F, x2 + k);
            float a3 = x.getAtIndex(F, x3 + k);
            int w = k * out + j0;
            for (int j = 0; j < nc; j++) {
                float bw = wt[w + j];
                c0[j] += a0 * bw;
                c1[j] += a1 * bw;
                c2[j] += a2 * bw;
                c3[j] += a3 * bw;
            }
        }
        float[][] accumulators = {c0, c1, c2, c3};
        for (int i = 0; i < nr; i++) {
            float[] acc = accumulators[i];
            long row = (long) (r0 + i) * out + j0;
            for (int j = 0; j < nc; j++) {
                y.setAtIndex(F, row + j, activate(acc[j], activation));
            }
        }
    }

    static float activate(float v, Activation activation) {
        return switch (activation) {
            case NONE -> v;
            case RELU -> v > 0 ? v : 0f;
            case TANH -> (float) Math.tanh(v);
            case GELU -> gelu(v);
        };
    }

    /** GELU, erf form: 0.5·x·(1 + erf(x/√2)). */
    public static float gelu(float x) {
        return (float) (0.5 * x * (1.0 + erf(x * (double) INV_SQRT2)));
    }

    /**
     * The error function in double precision (absolute error about 1e-15):
     * <ol>
     *   <li>|x| &lt; 2.5: the Maclaurin series erf(x) = 2/√π · Σ (-1)ⁿ x^(2n+1) / (n!·(2n+1)), summed
     *       until a term no longer changes the sum (at most ~50 terms; the largest term is below 1e5,
     *       so cancellation costs under 1e-11 relative);</li>
     *   <li>2.5 ≤ |x| &lt; 6: erf = 1 − erfc, with erfc from its continued fraction
     *       erfc(x) = e^(−x²)/√π · 1/(x + ½/(x + 1/(x + 3⁄2/(x + 2/(x + …))))) evaluated bottom-up
     *       from 60 levels;</li>
     *   <li>|x| ≥ 6: ±1 (erfc(6) ≈ 2e-17).</li>
     * </ol>
     */
    public static double erf(double x) {
        double ax = Math.abs(x);
        double r;
        if (ax < 2.5) {
            double x2 = ax * ax;
            double term = ax;
            double sum = ax;
            for (int n = 1; n < 100; n++) {
                term *= -x2 / n;
                double t = term / (2 * n + 1);
                sum += t;
                if (Math.abs(t) < 1e-17 * Math.abs(sum)) {
                    break;
                }
            }
            r = TWO_OVER_SQRT_PI * sum;
        } else if (ax < 6) {
            double f = ax;
            for (int k = 60; k >= 1; k--) {
                f = ax + (k * 0.5) / f;
            }
            r = 1.0 - Math.exp(-ax * ax) / (SQRT_PI * f);
        } else {
            r = 1.0;
        }
        return x < 0 ? -r : r;
    }

    @Override
    public long attentionWorkspaceBytes(int batch, int seq, int heads, int headDim) {
        return 0;
    }

    @Override
    public void attention(DeviceStream stream, long qkv, long attentionMask, long workspace, long context, int batch,
                          int seq, int heads, int headDim) {
        stream.enqueueHostTask(() -> {
            int hidden = heads * headDim;
            long tokens = (long) batch * seq;
            MemorySegment in = floats(qkv, tokens * 3 * hidden);
            MemorySegment mask = attentionMask == 0 ? null : at(attentionMask, tokens * Integer.BYTES);
            MemorySegment out = floats(context, tokens * hidden);
            IntStream units = IntStream.range(0, batch * heads);
            if ((long) batch * heads * seq * seq * headDim >= PARALLEL_THRESHOLD) {
                units = units.parallel();
            }
            units.forEach(unit -> attentionHead(in, mask, out, (long) (unit / heads) * seq, unit % heads, seq, heads,
                    headDim));
        });
    }

    /**
     * One (sequence, head): scores = q·kᵀ/√d, plus the most negative float where the key is padding
     * (as HuggingFace adds finfo.min), softmax over keys, context = p·v. The sequence is rows
     * {@code first .. first+seq-1} of qkv, mask and out (padded batches and packed sequences alike).
     */
    private static void attentionHead(MemorySegment qkv, MemorySegment mask, MemorySegment out, long first, int h,
                                      int seq, int heads, int headDim) {
        int hidden = heads * headDim;
        int stride = 3 * hidden;
        float[] q = new float[seq * headDim];
        float[] k = new float[seq * headDim];
        float[] v = new float[seq * headDim];
        for (int s = 0; s < seq; s++) {
            long row = (first + s) * stride + (long) h * headDim;
            MemorySegment.copy(qkv, F, row * Float.BYTES, q, s * headDim, headDim);
            MemorySegment.copy(qkv, F, (row + hidden) * Float.BYTES, k, s * headDim, headDim);
            MemorySegment.copy(qkv, F, (row + 2L * hidden) * Float.BYTES, v, s * headDim, headDim);
        }
        float[] bias = new float[seq];
        if (mask != null) {
            for (int s = 0; s < seq; s++) {
                bias[s] = mask.getAtIndex(I, first + s) != 0 ? 0f : -Float.MAX_VALUE;
            }
        }
        float scale = (float) (1.0 / Math.sqrt(headDim));
        float[] p = new float[seq];
        float[] ctx = new float[headDim];
        for (int i = 0; i < seq; i++) {
            float max = Float.NEGATIVE_INFINITY;
            for (int j = 0; j < seq; j++) {
                float dot = 0f;
                for (int t = 0; t < headDim; t++) {
                    dot += q[i * headDim + t] * k[j * headDim + t];
                }
                p[j] = dot * scale + bias[j];
                max = Math.max(max, p[j]);
            }
            double sum = 0;
            for (int j = 0; j < seq; j++) {
                p[j] = (float) Math.exp(p[j] - max);
                sum += p[j];
            }
            float inv = (float) (1.0 / sum);
            java.util.Arrays.fill(ctx, 0f);
            for (int j = 0; j < seq; j++) {
                float pj = p[j] * inv;
                for (int t = 0; t < headDim; t++) {
                    ctx[t] += pj * v[j * headDim + t];
                }
            }
            long row = (first + i) * hidden + (long) h * headDim;
            MemorySegment.copy(ctx, 0, out, F, row * Float.BYTES, headDim);
        }
    }

    @Override
    public void addLayerNorm(DeviceStream stream, long x, long residual, long gamma, long beta, long y, int rows,
                             int cols, float eps) {
        stream.enqueueHostTask(() -> {
            MemorySegment in = floats(x, (long) rows * cols);
            MemorySegment res = residual == 0 ? null : floats(residual, (long) rows * cols);
            MemorySegment g = floats(gamma, cols);
            MemorySegment be = floats(beta, cols);
            MemorySegment out = floats(y, (long) rows * cols);
            float[] v = new float[cols];
            for (int r = 0; r < rows; r++) {
                long base = (long) r * cols;
                double sum = 0;
                for (int c = 0; c < cols; c++) {
                    v[c] = in.getAtIndex(F, base + c) + (res == null ? 0f : res.getAtIndex(F, base + c));
                    sum += v[c];
                }
                double mean = sum / cols;
                double sq = 0;
                for (int c = 0; c < cols; c++) {
                    double d = v[c] - mean;
                    sq += d * d;
                }
                double inv = 1.0 / Math.sqrt(sq / cols + eps);
                for (int c = 0; c < cols; c++) {
                    out.setAtIndex(F, base + c, (float) ((v[c] - mean) * inv * g.getAtIndex(F, c) + be.getAtIndex(F, c)));
                }
            }
        });
    }

    @Override
    public void pool(DeviceStream stream, long hidden, long attentionMask, long out, int batch, int seq, int cols,
                     Pooling pooling) {
        stream.enqueueHostTask(() -> {
            MemorySegment h = floats(hidden, (long) batch * seq * cols);
            MemorySegment mask = attentionMask == 0 ? null : at(attentionMask, (long) batch * seq * Integer.BYTES);
            MemorySegment y = floats(out, (long) batch * cols);
            double[] acc = new double[cols];
            for (int b = 0; b < batch; b++) {
                poolSequence(h, mask, y, b, (long) b * seq, seq, cols, pooling, acc);
            }
        });
    }

    /** Pools rows {@code first .. first+seq-1} of hidden (and mask) into row {@code index} of y. */
    private static void poolSequence(MemorySegment h, MemorySegment mask, MemorySegment y, long index, long first,
                                     int seq, int cols, Pooling pooling, double[] acc) {
        if (seq == 0) {
            y.asSlice(index * cols * Float.BYTES, (long) cols * Float.BYTES).fill((byte) 0);   // an empty sequence
            return;
        }
        if (pooling == Pooling.CLS) {
            MemorySegment.copy(h, first * cols * Float.BYTES, y, index * cols * Float.BYTES, (long) cols * Float.BYTES);
            return;
        }
        java.util.Arrays.fill(acc, 0);
        double weight = 0;
        for (int s = 0; s < seq; s++) {
            if (mask != null && mask.getAtIndex(I, first + s) == 0) {
                continue;
            }
            weight += 1;
            long row = (first + s) * cols;
            for (int c = 0; c < cols; c++) {
                acc[c] += h.getAtIndex(F, row + c);
            }
        }
        double inv = 1.0 / Math.max(weight, 1e-9);
        for (int c = 0; c < cols; c++) {
            y.setAtIndex(F, index * cols + c, (float) (acc[c] * inv));
        }
    }

    @Override
    public void softmax(DeviceStream stream, long x, long y, int rows, int cols) {
        stream.enqueueHostTask(() -> {
            MemorySegment in = floats(x, (long) rows * cols);
            MemorySegment out = floats(y, (long) rows * cols);
            float[] v = new float[cols];
            for (int r = 0; r < rows; r++) {
                long base = (long) r * cols;
                float max = Float.NEGATIVE_INFINITY;
                for (int c = 0; c < cols; c++) {
                    v[c] = in.getAtIndex(F, base + c);
                    max = Math.max(max, v[c]);
                }
                double sum = 0;
                for (int c = 0; c < cols; c++) {
                    v[c] = (float) Math.exp(v[c] - max);
                    sum += v[c];
                }
                float inv = (float) (1.0 / sum);
                for (int c = 0; c < cols; c++) {
                    out.setAtIndex(F, base + c, v[c] * inv);
                }
            }
        });
    }

    // ---- packed sequences: the same arithmetic as the padded ops, per sequence over offsets ---------

    @Override
    public boolean supportsPackedSequences(int headDim) {
        return true;
    }

    @Override
    public void packedEmbeddingSum(DeviceStream stream, long inputIds, long tokenTypeIds, long positionIds,
                                   long wordTable, long positionTable, long tokenTypeTable, long out, int tokens,
                                   int hidden) {
        stream.enqueueHostTask(() -> {
            MemorySegment ids = at(inputIds, (long) tokens * Integer.BYTES);
            MemorySegment positions = at(positionIds, (long) tokens * Integer.BYTES);
            MemorySegment types = tokenTypeIds == 0 ? null : at(tokenTypeIds, (long) tokens * Integer.BYTES);
            MemorySegment y = floats(out, (long) tokens * hidden);
            for (long t = 0; t < tokens; t++) {
                int type = types == null ? 0 : types.getAtIndex(I, t);
                MemorySegment word = floats(wordTable + (long) ids.getAtIndex(I, t) * hidden * Float.BYTES, hidden);
                MemorySegment pos = floats(positionTable + (long) positions.getAtIndex(I, t) * hidden * Float.BYTES, hidden);
                MemorySegment tt = floats(tokenTypeTable + (long) type * hidden * Float.BYTES, hidden);
                long row = t * hidden;
                for (int c = 0; c < hidden; c++) {
                    y.setAtIndex(F, row + c, word.getAtIndex(F, c) + pos.getAtIndex(F, c) + tt.getAtIndex(F, c));
                }
            }
        });
    }

    @Override
    public void varlenAttention(DeviceStream stream, long qkv, long attentionMask, long offsets, long context,
                                int sequences, int tokens, int maxSeq, int heads, int headDim) {
        stream.enqueueHostTask(() -> {
            int hidden = heads * headDim;
            MemorySegment in = floats(qkv, (long) tokens * 3 * hidden);
            MemorySegment mask = attentionMask == 0 ? null : at(attentionMask, (long) tokens * Integer.BYTES);
            MemorySegment out = floats(context, (long) tokens * hidden);
            int[] starts = readOffsets(offsets, sequences, tokens);
            IntStream units = IntStream.range(0, sequences * heads);
            if ((long) sequences * heads * maxSeq * maxSeq * headDim >= PARALLEL_THRESHOLD) {
                units = units.parallel();
            }
            units.forEach(unit -> {
                int sequence = unit / heads;
                attentionHead(in, mask, out, starts[sequence], unit % heads, starts[sequence + 1] - starts[sequence],
                        heads, headDim);
            });
        });
    }

    @Override
    public void packedPool(DeviceStream stream, long hidden, long attentionMask, long offsets, long out, int sequences,
                           int tokens, int cols, Pooling pooling) {
        stream.enqueueHostTask(() -> {
            MemorySegment h = floats(hidden, (long) tokens * cols);
            MemorySegment mask = attentionMask == 0 ? null : at(attentionMask, (long) tokens * Integer.BYTES);
            MemorySegment y = floats(out, (long) sequences * cols);
            int[] starts = readOffsets(offsets, sequences, tokens);
            double[] acc = new double[cols];
            for (int i = 0; i < sequences; i++) {
                poolSequence(h, mask, y, i, starts[i], starts[i + 1] - starts[i], cols, pooling, acc);
            }
        });
    }

    /**
     * The offsets array, checked to rise from 0 to at most {@code tokens} (a wrong one would read out of bounds); rows
     * past the last offset belong to no sequence.
     */
    private static int[] readOffsets(long offsets, int sequences, int tokens) {
        int[] starts = at(offsets, (long) (sequences + 1) * Integer.BYTES).toArray(ValueLayout.JAVA_INT);
        if (starts[0] != 0 || starts[sequences] > tokens) {
            throw new IllegalArgumentException("offsets run from " + starts[0] + " to " + starts[sequences]
                    + ", expected 0 to at most " + tokens);
        }
        for (int i = 0; i < sequences; i++) {
            if (starts[i + 1] < starts[i]) {
                throw new IllegalArgumentException("offsets[" + (i + 1) + "] = " + starts[i + 1] + " < offsets[" + i
                        + "] = " + starts[i]);
            }
        }
        return starts;
    }
}
