// Linear layers: Y[M, N] = act(X[M, K] · W[N, K]ᵀ + bias[N]), all row-major FP32 in device memory.
//
// Both operands are K-contiguous ("NT" product), which is how a PyTorch nn.Linear stores its weight.
//
//                 K                           K
//          +-------------+             +-------------+
//     M    |   X tile    |        N    |   W tile    |    one block computes a BM x BN tile of Y,
//          | BM x BK ... |             | BN x BK ... |    walking K in steps of BK
//          +-------------+             +-------------+
//
// Kernels, picked by the caller's precision and shape:
//   gemm_f32            exact FP32 on the CUDA cores (FFMA). 128x128 tile, BK = 8, 256 threads, 8x8 outputs per
//                       thread, shared memory stored k-major and double buffered. Matches a CPU FP32 reference to
//                       rounding, so tests can compare with transformers at 1e-4.
//   gemm_tc_tf32_*      tensor cores (mma.sync m16n8k8), TF32 operands, FP32 accumulation.
//   gemm_tc_bf16_*      tensor cores (mma.sync m16n8k16), BF16 operands, FP32 accumulation.
//   gemm_tc_tf32x3_*    tensor cores, FP32 operands split into two TF32 parts, x = hi + lo, and three products
//                       hi·hi + hi·lo + lo·hi (lo·lo, ~2^-22 relative, dropped): close to FP32 accuracy at about a
//                       third of the TF32 kernel's rate, which can still beat gemm_f32 on large products.
//   (*: _128 is a 128x128 tile with 8 warps (warp tile 64x32), _64 a 64x64 tile with 4 warps (warp tile 32x32)
//   for products with too few 128x128 tiles to fill the device.)
// Operands stay FP32 in device memory for every kernel; the tensor-core ones round them as they read shared
// memory (see "Tensor cores, asynchronous copies" below for the pipeline and the shared-memory layout).
// Preconditions for the tensor-core kernels: K % 4 == 0 and 16-byte aligned X and W (the caller falls back to
// gemm_f32 otherwise).
//
// Measured on an H200 (tools/cuda-harness, see tools/cuda-harness/NOTES.md): 4096^3 gemm_f32 40 TFLOP/s,
// gemm_tc_tf32_128 170, gemm_tc_bf16_128 160.

#include <cuda_bf16.h>
#include "common.cuh"

// ---------------------------------------------------------------------------------------------------------------------
// Exact FP32
// ---------------------------------------------------------------------------------------------------------------------

#define SG_BM 128
#define SG_BN 128
#define SG_BK 8
#define SG_PAD 4

// Loads p[row, k..k+3] (row stride K) with zeros past `rows` rows and past column kEnd.
static __device__ __forceinline__ void sg_load4(const float* __restrict__ p, int rows, int K, int kEnd, int row,
                                                int k, float out[4]) {
    if (row < rows && k + 3 < kEnd && (K & 3) == 0) {
        float4 v = __ldg(reinterpret_cast<const float4*>(p + (size_t) row * K + k));
        out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;
    } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            out[i] = (row < rows && k + i < kEnd) ? __ldg(p + (size_t) row * K + k + i) : 0.0f;
        }
    }
}

// SPLITK: this block sums only k in [blockIdx.z * kChunk, min(K, (blockIdx.z + 1) * kChunk)) and atomically adds
// its raw partial sums to Y (prepared by gemm_splitk_init, finished by gemm_splitk_act); bias and act unused.
template <bool SPLITK>
__device__ __forceinline__ void gemm_f32_body(const float* __restrict__ X, const float* __restrict__ W,
                                              const float* __restrict__ bias, float* __restrict__ Y, int M, int N,
                                              int K, int act, int kChunk) {
    __shared__ __align__(16) float As[2][SG_BK][SG_BM + SG_PAD];
    __shared__ __align__(16) float Bs[2][SG_BK][SG_BN + SG_PAD];

    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * SG_BM;
    const int n0 = blockIdx.x * SG_BN;
    const int loadRow = tid >> 1;        // 0..127
    const int loadK = (tid & 1) * 4;     // 0 or 4
    const int tx = tid & 15;             // column group
    const int ty = tid >> 4;             // row group

    float aReg[4], bReg[4];
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    const int kBegin = SPLITK ? blockIdx.z * kChunk : 0;
    const int kEnd = SPLITK ? min(K, kBegin + kChunk) : K;
    const int kTiles = (kEnd - kBegin + SG_BK - 1) / SG_BK;
    sg_load4(X, M, K, kEnd, m0 + loadRow, kBegin + loadK, aReg);
    sg_load4(W, N, K, kEnd, n0 + loadRow, kBegin + loadK, bReg);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        As[0][loadK + i][loadRow] = aReg[i];
        Bs[0][loadK + i][loadRow] = bReg[i];
    }
    __syncthreads();

    for (int t = 0; t < kTiles; ++t) {
        const int cur = t & 1;
        const bool more = t + 1 < kTiles;
        if (more) {
            sg_load4(X, M, K, kEnd, m0 + loadRow, kBegin + (t + 1) * SG_BK + loadK, aReg);
            sg_load4(W, N, K, kEnd, n0 + loadRow, kBegin + (t + 1) * SG_BK + loadK, bReg);
        }
#pragma unroll
        for (int kk = 0; kk < SG_BK; ++kk) {
            float4 a0 = *reinterpret_cast<const float4*>(&As[cur][kk][ty * 4]);
            float4 a1 = *reinterpret_cast<const float4*>(&As[cur][kk][64 + ty * 4]);
            float4 b0 = *reinterpret_cast<const float4*>(&Bs[cur][kk][tx * 4]);
            float4 b1 = *reinterpret_cast<const float4*>(&Bs[cur][kk][64 + tx * 4]);
            float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (more) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                As[cur ^ 1][loadK + i][loadRow] = aReg[i];
                Bs[cur ^ 1][loadK + i][loadRow] = bReg[i];
            }
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int row = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
        if (row >= M) continue;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int col = n0 + half * 64 + tx * 4;
            float* out = Y + (size_t) row * N + col;
            if (SPLITK) {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (col + j < N) atomicAdd(out + j, acc[i][half * 4 + j]);
            } else {
                float v[4];
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const int c = col + j;
                    float b = (bias != nullptr && c < N) ? __ldg(bias + c) : 0.0f;
                    v[j] = gp_activate(acc[i][half * 4 + j] + b, act);
                }
                if (col + 3 < N && (N & 3) == 0) {
                    *reinterpret_cast<float4*>(out) = make_float4(v[0], v[1], v[2], v[3]);
                } else {
#pragma unroll
                    for (int j = 0; j < 4; ++j)
                        if (col + j < N) out[j] = v[j];
                }
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(256)
gemm_f32(const float* __restrict__ X, const float* __restrict__ W, const float* __restrict__ bias,
         float* __restrict__ Y, int M, int N, int K, int act) {
    gemm_f32_body<false>(X, W, bias, Y, M, N, K, act, K);
}

extern "C" __global__ void __launch_bounds__(256)
gemm_f32_splitk(const float* __restrict__ X, const float* __restrict__ W, float* __restrict__ Y, int M, int N,
                int K, int kChunk) {
    gemm_f32_body<true>(X, W, nullptr, Y, M, N, K, ACT_NONE, kChunk);
}

// ---------------------------------------------------------------------------------------------------------------------
// Split-K (products with too few output tiles to fill the device, e.g. 128 tokens x 768 outputs x K 3072):
//
//        K                          grid z = slice s of kChunk columns of K (the last one may be shorter)
//   +----+----+----+                1. gemm_splitk_init   Y = bias (or 0), one thread per element
//   | s0 | s1 | s2 |  x  Wᵀ  ->     2. gemm_*_splitk      each (tile, s) block atomically adds its partial sum
//   +----+----+----+                3. gemm_splitk_act    Y = act(Y) in place, launched only when act != NONE
//
// The sum is complete only after step 2 has finished, so the activation cannot be fused into the atomic
// epilogue; step 3 costs one extra pass over Y, small next to the products that get split. The result differs
// from the unsplit kernels only in the order of the FP32 additions (slices arrive in any order).
// ---------------------------------------------------------------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(256)
gemm_splitk_init(const float* __restrict__ bias, float* __restrict__ Y, int M, int N) {
    const size_t total = (size_t) M * N;
    for (size_t i = (size_t) blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t) gridDim.x * blockDim.x) {
        Y[i] = bias != nullptr ? __ldg(bias + i % N) : 0.0f;
    }
}

extern "C" __global__ void __launch_bounds__(256)
gemm_splitk_act(float* __restrict__ Y, int M, int N, int act) {
    const size_t total = (size_t) M * N;
    for (size_t i = (size_t) blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t) gridDim.x * blockDim.x) {
        Y[i] = gp_activate(Y[i], act);
    }
}

// ---------------------------------------------------------------------------------------------------------------------
// Tensor cores (TF32 / BF16 via mma.sync)
// ---------------------------------------------------------------------------------------------------------------------

static __device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

static __device__ __forceinline__ void ldmatrix_x4(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2,
                                                   unsigned& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

template <bool BF16>
static __device__ __forceinline__ void mma_step(float c[4], const unsigned a[4], unsigned b0, unsigned b1) {
    if (BF16) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

static __device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
    __nv_bfloat162 p = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&p);
}

// ---------------------------------------------------------------------------------------------------------------------
// Tensor cores, asynchronous copies (gemm_tc_*): the FP32 operands go from global to shared memory untouched with
// cp.async, STAGES tiles deep, and are rounded only when a warp loads its fragments.
//
//   shared memory, one stage (BK = 16 floats = 64 bytes per row, four 16-byte chunks, no padding):
//     row r, logical chunk c  ->  byte r*64 + (c ^ swizzle(r))*16
//   TF32 reads fragments with ldmatrix (8 rows x 16 bytes per phase): swizzle(r) = (r >> 1) & 3 puts the 8 rows
//   of a phase in 8 distinct 16-byte bank groups. BF16 reads float2 pairs (a half-warp touches 4 rows x 32 bytes):
//   swizzle(r) = ((r >> 1) & 1) * 2 spreads those 4 rows over the 4 32-byte bank groups.
//
//   Pipeline (t = k-tile):  prologue issues tiles 0..STAGES-2; each iteration waits for tile t, syncs the block
//   (which also frees the stage read in iteration t-1), issues tile t+STAGES-1 into that freed stage, and runs
//   the tensor cores on tile t. Rows past M/N and columns past K are zero-filled by cp.async's src-size operand.
//   TF32 feeds the FP32 bit patterns straight to mma (the unit ignores the low 13 mantissa bits: truncation);
//   BF16 rounds each pair to nearest-even with cvt.rn.bf16x2. SPLIT (tf32x3) masks the fragments to their TF32
//   part hi = x & 0xffffe000 explicitly (so the result does not depend on how the unit converts), keeps
//   lo = x - hi (exact in FP32, at most 2^-10 |x|), and issues lo·hi and hi·lo before hi·hi for each product.
// ---------------------------------------------------------------------------------------------------------------------

static __device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int srcBytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(srcBytes));
}

static __device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
static __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

template <bool BF16>
static __device__ __forceinline__ int tc_swizzle(int row) {
    return BF16 ? ((row >> 1) & 1) << 1 : (row >> 1) & 3;
}

static __device__ __forceinline__ unsigned tf32_split(unsigned& x) {
    const unsigned hi = x & 0xffffe000u;
    const unsigned lo = __float_as_uint(__uint_as_float(x) - __uint_as_float(hi));
    x = hi;
    return lo;
}

// SPLITK: as for gemm_f32_body; kChunk is a multiple of BK (16), so slices start on a k-tile.
template <bool BF16, int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, bool SPLIT = false, bool SPLITK = false>
__device__ __forceinline__ void gemm_async(const float* __restrict__ X, const float* __restrict__ W,
                                                  const float* __restrict__ bias, float* __restrict__ Y,
                                                  int M, int N, int K, int act, int kChunk = 0) {
    constexpr int THREADS = WARPS_M * WARPS_N * 32;
    constexpr int BK = 16;
    constexpr int ROWS = BM + BN;
    constexpr int STAGE_BYTES = ROWS * 64;
    constexpr int LOADS = ROWS * 4 / THREADS;
    constexpr int WM = BM / WARPS_M;
    constexpr int WN = BN / WARPS_N;
    constexpr int MB = WM / 16;
    constexpr int NB = WN / 8;
    static_assert(ROWS * 4 % THREADS == 0, "loader shape");
    static_assert(NB % 2 == 0, "B fragments come in pairs");

    __shared__ __align__(128) unsigned char smem[STAGES * STAGE_BYTES];

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int wm = warp / WARPS_N;
    const int wn = warp % WARPS_N;
    const int m0 = blockIdx.y * BM;
    const int n0 = blockIdx.x * BN;
    const unsigned smemBase = smem_addr(smem);
    const int kBegin = SPLITK ? blockIdx.z * kChunk : 0;
    const int kEnd = SPLITK ? min(K, kBegin + kChunk) : K;
    const int kTiles = (kEnd - kBegin + BK - 1) / BK;

    auto issue = [&](int tile) {
        if (tile < kTiles) {
            const unsigned stage = smemBase + (tile % STAGES) * STAGE_BYTES;
#pragma unroll
            for (int i = 0; i < LOADS; ++i) {
                const int f = tid + i * THREADS;
                const int r = f >> 2;
                const int c = f & 3;
                const int k = kBegin + tile * BK + c * 4;
                const bool isX = r < BM;
                const int gRow = isX ? m0 + r : n0 + (r - BM);
                const bool in = gRow < (isX ? M : N) && k < kEnd;
                const float* src = (isX ? X : W) + (in ? (size_t) gRow * K + k : 0);
                cp_async16(stage + r * 64 + ((c ^ tc_swizzle<BF16>(r)) << 4), src, in ? 16 : 0);
            }
        }
        cp_async_commit();
    };

    float acc[MB][NB][4];
#pragma unroll
    for (int i = 0; i < MB; ++i)
#pragma unroll
        for (int j = 0; j < NB; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) issue(s);

    const int g = lane >> 2;
    const int q = lane & 3;

    for (int t = 0; t < kTiles; ++t) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        issue(t + STAGES - 1);
        const unsigned stage = smemBase + (t % STAGES) * STAGE_BYTES;
        if (BF16) {
            // One k16 step: A pairs at k = 2q, 2q+8 of rows g, g+8; B pairs at k = 2q, 2q+8 of column g.
            const unsigned char* st = smem + (t % STAGES) * STAGE_BYTES;
            unsigned a[MB][4];
            unsigned b[NB][2];
#pragma unroll
            for (int i = 0; i < MB; ++i) {
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int r = wm * WM + i * 16 + g + h * 8;
#pragma unroll
                    for (int kh = 0; kh < 2; ++kh) {
                        const int c = kh * 2 + (q >> 1);
                        const float2 v = *reinterpret_cast<const float2*>(
                            st + r * 64 + ((c ^ tc_swizzle<true>(r)) << 4) + (q & 1) * 8);
                        a[i][kh * 2 + h] = pack_bf16(v.x, v.y);
                    }
                }
            }
#pragma unroll
            for (int j = 0; j < NB; ++j) {
                const int r = BM + wn * WN + j * 8 + g;
#pragma unroll
                for (int kh = 0; kh < 2; ++kh) {
                    const int c = kh * 2 + (q >> 1);
                    const float2 v = *reinterpret_cast<const float2*>(
                        st + r * 64 + ((c ^ tc_swizzle<true>(r)) << 4) + (q & 1) * 8);
                    b[j][kh] = pack_bf16(v.x, v.y);
                }
            }
#pragma unroll
            for (int i = 0; i < MB; ++i)
#pragma unroll
                for (int j = 0; j < NB; ++j) mma_step<true>(acc[i][j], a[i], b[j][0], b[j][1]);
        } else {
#pragma unroll
            for (int ks = 0; ks < 2; ++ks) {
                unsigned a[MB][4];
                unsigned b[NB][2];
#pragma unroll
                for (int i = 0; i < MB; ++i) {
                    const int r = wm * WM + i * 16 + (lane & 15);
                    const int c = ks * 2 + (lane >> 4);
                    ldmatrix_x4(stage + r * 64 + ((c ^ tc_swizzle<false>(r)) << 4), a[i][0], a[i][1], a[i][2],
                                a[i][3]);
                }
#pragma unroll
                for (int j = 0; j < NB; j += 2) {
                    const int r = BM + wn * WN + j * 8 + (lane >> 4) * 8 + (lane & 7);
                    const int c = ks * 2 + ((lane >> 3) & 1);
                    ldmatrix_x4(stage + r * 64 + ((c ^ tc_swizzle<false>(r)) << 4), b[j][0], b[j][1], b[j + 1][0],
                                b[j + 1][1]);
                }
                if (SPLIT) {
                    unsigned aLo[MB][4];
                    unsigned bLo[NB][2];
#pragma unroll
                    for (int i = 0; i < MB; ++i)
#pragma unroll
                        for (int e = 0; e < 4; ++e) aLo[i][e] = tf32_split(a[i][e]);
#pragma unroll
                    for (int j = 0; j < NB; ++j) {
                        bLo[j][0] = tf32_split(b[j][0]);
                        bLo[j][1] = tf32_split(b[j][1]);
                    }
#pragma unroll
                    for (int i = 0; i < MB; ++i)
#pragma unroll
                        for (int j = 0; j < NB; ++j) {
                            mma_step<false>(acc[i][j], aLo[i], b[j][0], b[j][1]);
                            mma_step<false>(acc[i][j], a[i], bLo[j][0], bLo[j][1]);
                        }
                }
#pragma unroll
                for (int i = 0; i < MB; ++i)
#pragma unroll
                    for (int j = 0; j < NB; ++j) mma_step<false>(acc[i][j], a[i], b[j][0], b[j][1]);
            }
        }
    }
    cp_async_wait<0>();

    if (SPLITK) {
#pragma unroll
        for (int j = 0; j < NB; ++j) {
            const int col = n0 + wn * WN + j * 8 + q * 2;
#pragma unroll
            for (int i = 0; i < MB; ++i)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int row = m0 + wm * WM + i * 16 + g + h * 8;
                    if (row >= M) continue;
                    float* out = Y + (size_t) row * N + col;
                    if (col < N) atomicAdd(out, acc[i][j][h * 2]);
                    if (col + 1 < N) atomicAdd(out + 1, acc[i][j][h * 2 + 1]);
                }
        }
        return;
    }
    const bool pairs = (N & 1) == 0;
#pragma unroll
    for (int j = 0; j < NB; ++j) {
        const int col = n0 + wn * WN + j * 8 + q * 2;
        const float b0 = (bias != nullptr && col < N) ? __ldg(bias + col) : 0.0f;
        const float b1 = (bias != nullptr && col + 1 < N) ? __ldg(bias + col + 1) : 0.0f;
#pragma unroll
        for (int i = 0; i < MB; ++i) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = m0 + wm * WM + i * 16 + g + h * 8;
                if (row >= M) continue;
                const float v0 = gp_activate(acc[i][j][h * 2] + b0, act);
                const float v1 = gp_activate(acc[i][j][h * 2 + 1] + b1, act);
                float* out = Y + (size_t) row * N + col;
                if (pairs && col + 1 < N) {
                    *reinterpret_cast<float2*>(out) = make_float2(v0, v1);
                } else {
                    if (col < N) out[0] = v0;
                    if (col + 1 < N) out[1] = v1;
                }
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(256, 2)
gemm_tc_bf16_128(const float* __restrict__ X, const float* __restrict__ W, const float* __restrict__ bias,
                 float* __restrict__ Y, int M, int N, int K, int act) {
    gemm_async<true, 128, 128, 2, 4, 3>(X, W, bias, Y, M, N, K, act);
}

extern "C" __global__ void __launch_bounds__(128)
gemm_tc_bf16_64(const float* __restrict__ X, const float* __restrict__ W, const float* __restrict__ bias,
                float* __restrict__ Y, int M, int N, int K, int act) {
    gemm_async<true, 64, 64, 2, 2, 4>(X, W, bias, Y, M, N, K, act);
}

extern "C" __global__ void __launch_bounds__(256, 2)
gemm_tc_tf32_128(const float* __restrict__ X, const float* __restrict__ W, const float* __restrict__ bias,
                 float* __restrict__ Y, int M, int N, int K, int act) {
    gemm_async<false, 128, 128, 2, 4, 3>(X, W, bias, Y, M, N, K, act);
}

extern "C" __global__ void __launch_bounds__(128)
gemm_tc_tf32_64(const float* __restrict__ X, const float* __restrict__ W, const float* __restrict__ bias,
                float* __restrict__ Y, int M, int N, int K, int act) {
    gemm_async<false, 64, 64, 2, 2, 4>(X, W, bias, Y, M, N, K, act);
}

// Three TF32 products (near-FP32 accuracy). ptxas (sm_90) fits the split operands in 118 registers without
// spilling, so two blocks per SM still fit, as for the TF32 kernel.
extern "C" __global__ void __launch_bounds__(256, 2)
gemm_tc_tf32x3_128(const float* __restrict__ X, const float* __restrict__ W, const float* __restrict__ bias,
                   float* __restrict__ Y, int M, int N, int K, int act) {
    gemm_async<false, 128, 128, 2, 4, 3, true>(X, W, bias, Y, M, N, K, act);
}

extern "C" __global__ void __launch_bounds__(128)
gemm_tc_tf32x3_64(const float* __restrict__ X, const float* __restrict__ W, const float* __restrict__ bias,
                  float* __restrict__ Y, int M, int N, int K, int act) {
    gemm_async<false, 64, 64, 2, 2, 4, true>(X, W, bias, Y, M, N, K, act);
}

// Split-K variants (see "Split-K" above): Y must hold the bias (or zeros); raw partial sums are added atomically.
extern "C" __global__ void __launch_bounds__(128)
gemm_tc_tf32_64_splitk(const float* __restrict__ X, const float* __restrict__ W, float* __restrict__ Y, int M, int N,
                       int K, int kChunk) {
    gemm_async<false, 64, 64, 2, 2, 4, false, true>(X, W, nullptr, Y, M, N, K, ACT_NONE, kChunk);
}

extern "C" __global__ void __launch_bounds__(128)
gemm_tc_tf32x3_64_splitk(const float* __restrict__ X, const float* __restrict__ W, float* __restrict__ Y, int M,
                         int N, int K, int kChunk) {
    gemm_async<false, 64, 64, 2, 2, 4, true, true>(X, W, nullptr, Y, M, N, K, ACT_NONE, kChunk);
}

extern "C" __global__ void __launch_bounds__(128)
gemm_tc_bf16_64_splitk(const float* __restrict__ X, const float* __restrict__ W, float* __restrict__ Y, int M, int N,
                       int K, int kChunk) {
    gemm_async<true, 64, 64, 2, 2, 4, false, true>(X, W, nullptr, Y, M, N, K, ACT_NONE, kChunk);
}

// ---------------------------------------------------------------------------------------------------------------------
// bf16 in, bf16 out, one warp per output element (lanes stride K, FP32 accumulation, warp sum): for the few products
// on bf16 activations the library declines (e.g. a classifier with 3 outputs, whose rows are not 16-byte multiples).
// Grid ceil(M·N / 8) blocks of 256 threads; bias may be null.
// ---------------------------------------------------------------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(256)
linear_bf16_warp(const __nv_bfloat16* __restrict__ X, const __nv_bfloat16* __restrict__ W,
                 const __nv_bfloat16* __restrict__ bias, __nv_bfloat16* __restrict__ Y, int M, int N, int K, int act) {
    const long long element = (long long) blockIdx.x * 8 + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (element >= (long long) M * N) return;
    const int m = (int) (element / N);
    const int n = (int) (element % N);
    const __nv_bfloat16* x = X + (size_t) m * K;
    const __nv_bfloat16* w = W + (size_t) n * K;
    float acc = 0.0f;
    for (int k = lane; k < K; k += 32) acc += __bfloat162float(x[k]) * __bfloat162float(w[k]);
    acc = gp_warp_sum(acc);
    if (lane == 0) {
        if (bias != nullptr) acc += __bfloat162float(bias[n]);
        Y[element] = __float2bfloat16_rn(gp_activate(acc, act));
    }
}
