// Multi-head self-attention over a packed QKV tensor, fused (scores never reach device memory).
//
// Notation: B batch, S sequence, H heads, D head size. qkv is [B·S, 3·H·D]: for token (b, s) the row holds
// Q (H blocks of D), then K, then V. mask is INT32 [B, S] (1 real, 0 padding) or null. ctx is [B·S, H·D].
//
//   ctx[b, s, h, :] = Σ_j softmax_j( Q[b,s,h,:]·K[b,j,h,:] / √D  (masked keys: -FLT_MAX) ) · V[b,j,h,:]
//
// A masked key gets the score -FLT_MAX, which is what HuggingFace's additive mask (finfo.min) amounts to in
// FP32; so a row whose keys are all masked averages V uniformly, exactly as transformers does.
//
// One block of 128 threads per (query tile of 32, head, batch):
//
//         keys j -> (tiles of KT)
//   q  +--------------------------+      thread (r, c) = (tid / 4, tid % 4) owns query row r, the keys
//   u  | r: c c c c c c c c ...    |      j = c, c+4, c+8, ... of each key tile, and the output columns
//   e  |                           |      d = c, c+4, c+8, ... of row r; the four threads of a row are
//   r  +--------------------------+      adjacent lanes and combine with two shuffles.
//   y
//
// Steps per key tile (online softmax, so one pass over the keys):
//   1. Load K and V tiles into shared memory (zero-padded to DMAX columns and past S).
//   2. Each thread computes its KT/4 scores, applies the mask, and the row maximum of the tile (shuffles).
//   3. m' = max(m, tile max); rescale the running sum l and the accumulators by exp(m - m').
//   4. p = exp(score - m'), l += Σp; write p to shared memory (row r only, read back by the same warp).
//   5. acc[d] += Σ_j p[j] · V[j, d].
// Finally ctx = acc / l. Keys past S get -inf (they do not exist); masked keys get -FLT_MAX (they exist but
// are padding), which keeps a fully masked row finite.
// Q is pre-scaled by 1/√D when loaded. DMAX is the compiled head-size bound; D ≤ DMAX at run time.

#include "common.cuh"

#define ATT_QT 32
#define ATT_THREADS 128

template <int DMAX, int KT>
__device__ __forceinline__ void attention_tile(const float* __restrict__ qkv, const int* __restrict__ mask,
                                                      float* __restrict__ ctx, int S, int H, int D) {
    constexpr int DP = DMAX + 1;      // padded row (bank spread)
    constexpr int KPL = KT / 4;       // keys per lane per tile
    constexpr int DPL = DMAX / 4;     // output columns per lane
    __shared__ float Qs[ATT_QT][DP];
    __shared__ float Ks[KT][DP];
    __shared__ float Vs[KT][DP];
    __shared__ float Ps[ATT_QT][KT + 1];
    __shared__ int valid[KT];

    const int b = blockIdx.z;
    const int h = blockIdx.y;
    const int q0 = blockIdx.x * ATT_QT;
    const int tid = threadIdx.x;
    const int r = tid >> 2;
    const int c = tid & 3;
    const size_t ld = (size_t) 3 * H * D;
    const float* base = qkv + (size_t) b * S * ld + (size_t) h * D;
    const float scale = rsqrtf((float) D);

    for (int idx = tid; idx < ATT_QT * DMAX; idx += ATT_THREADS) {
        const int qr = idx / DMAX;
        const int d = idx % DMAX;
        const int s = q0 + qr;
        Qs[qr][d] = (s < S && d < D) ? base[(size_t) s * ld + d] * scale : 0.0f;
    }

    float acc[DPL];
#pragma unroll
    for (int i = 0; i < DPL; ++i) acc[i] = 0.0f;
    float m = -INFINITY;
    float l = 0.0f;

    for (int k0 = 0; k0 < S; k0 += KT) {
        __syncthreads();   // previous tile fully consumed (and Qs written, on the first pass)
        for (int idx = tid; idx < KT * DMAX; idx += ATT_THREADS) {
            const int kr = idx / DMAX;
            const int d = idx % DMAX;
            const int j = k0 + kr;
            const bool in = j < S && d < D;
            const float* row = base + (size_t) j * ld + d;
            Ks[kr][d] = in ? row[(size_t) H * D] : 0.0f;
            Vs[kr][d] = in ? row[(size_t) 2 * H * D] : 0.0f;
        }
        if (tid < KT) {
            const int j = k0 + tid;
            valid[tid] = j >= S ? 0 : (mask == nullptr || mask[(size_t) b * S + j] != 0) ? 1 : 2;
        }
        __syncthreads();

        float s[KPL];
        float tileMax = -INFINITY;
#pragma unroll
        for (int i = 0; i < KPL; ++i) {
            const int kr = c + 4 * i;
            float dot = 0.0f;
#pragma unroll
            for (int d = 0; d < DMAX; ++d) dot = fmaf(Qs[r][d], Ks[kr][d], dot);
            const int v = valid[kr];
            s[i] = v == 1 ? dot : (v == 2 ? -3.402823466e38f : -INFINITY);
            tileMax = fmaxf(tileMax, s[i]);
        }
        tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, 1));
        tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, 2));
        const float mNew = fmaxf(m, tileMax);       // finite: key k0 exists
        const float alpha = expf(m - mNew);         // 0 on the first tile (m = -inf)
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < KPL; ++i) {
            const float p = expf(s[i] - mNew);
            Ps[r][c + 4 * i] = p;
            sum += p;
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        l = l * alpha + sum;
        m = mNew;
        __syncwarp();
#pragma unroll
        for (int i = 0; i < DPL; ++i) acc[i] *= alpha;
#pragma unroll 4
        for (int j = 0; j < KT; ++j) {
            const float p = Ps[r][j];
#pragma unroll
            for (int i = 0; i < DPL; ++i) acc[i] = fmaf(p, Vs[j][c + 4 * i], acc[i]);
        }
        __syncwarp();
    }

    const int s = q0 + r;
    if (s < S) {
        const float inv = 1.0f / l;
        float* out = ctx + ((size_t) b * S + s) * H * D + (size_t) h * D;
#pragma unroll
        for (int i = 0; i < DPL; ++i) {
            const int d = c + 4 * i;
            if (d < D) out[d] = acc[i] * inv;
        }
    }
}

// Grid (ceil(S / 32), H, B), 128 threads. D ≤ 32.
extern "C" __global__ void __launch_bounds__(ATT_THREADS)
attention_d32(const float* __restrict__ qkv, const int* __restrict__ mask, float* __restrict__ ctx, int S, int H,
              int D) {
    attention_tile<32, 32>(qkv, mask, ctx, S, H, D);
}

// Grid (ceil(S / 32), H, B), 128 threads. D ≤ 64.
extern "C" __global__ void __launch_bounds__(ATT_THREADS)
attention_d64(const float* __restrict__ qkv, const int* __restrict__ mask, float* __restrict__ ctx, int S, int H,
              int D) {
    attention_tile<64, 32>(qkv, mask, ctx, S, H, D);
}

// Grid (ceil(S / 32), H, B), 128 threads. D ≤ 128.
extern "C" __global__ void __launch_bounds__(ATT_THREADS)
attention_d128(const float* __restrict__ qkv, const int* __restrict__ mask, float* __restrict__ ctx, int S, int H,
               int D) {
    attention_tile<128, 16>(qkv, mask, ctx, S, H, D);
}

// ---------------------------------------------------------------------------------------------------------------------
// BF16 tensor-core variant for head size 64 (BERT-base), used when linear layers run in BF16 too.
//
// One block of 4 warps per (64 queries, head, batch); warp w owns queries 16w..16w+15. Q, K, V are rounded to
// bf16 as they are stored in shared memory (rows of 64 bf16 + 8 pad = 144 bytes: the 8 row addresses of an
// ldmatrix phase hit distinct bank groups). Per key tile of 64:
//   1. S = Q·Kᵀ with mma m16n8k16 (Q fragments loaded once; K fragments by ldmatrix, keys as the n dimension).
//   2. Mask as above, online softmax on the FP32 accumulators; the row max and sum combine over the 4 lanes
//      that share a row (shuffles).
//   3. The accumulator layout of two neighbouring 8-key blocks of P is exactly the A-fragment layout of a
//      16-key step, so P goes from registers to the second product without shared memory.
//   4. O += P·V with V fragments from ldmatrix.trans (V is stored key-major, the product needs it d-major).
// Error: about bf16 rounding of Q, K, P, V (rel ~1e-2 on the context), FP32 accumulation and softmax.
// ---------------------------------------------------------------------------------------------------------------------

#include <cuda_bf16.h>

#define FA_ROW 144   // bytes per shared row: 64 bf16 + 16 pad

static __device__ __forceinline__ unsigned fa_pack(float lo, float hi) {
    __nv_bfloat162 p = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&p);
}

static __device__ __forceinline__ void fa_ldmatrix(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2,
                                                   unsigned& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

static __device__ __forceinline__ void fa_ldmatrix_trans(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2,
                                                         unsigned& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

static __device__ __forceinline__ void fa_mma(float c[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                              unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Stores rows [row0, row0+64) of one operand (column offset `col` in the qkv row) as bf16, times `scale`.
/*
 * One key tile of the online softmax shared by the tensor-core attention kernels (BF16 and TF32):
 * masks the scores s (valid: 0 = past the sequence, 2 = padding, 1 = real key), raises the running
 * row maxima m across the four lanes of a quad, rescales the running sums l and the output o by
 * exp(m_old - m_new), and turns s into the unnormalised probabilities of this tile.
 */
static __device__ __forceinline__ void fa_online_softmax(float s[8][4], float o[8][4], float m[2], float l[2],
                                                         const int* valid, int q) {
    float tileMax[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nb = 0; nb < 8; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int v = valid[nb * 8 + 2 * q + (e & 1)];
            s[nb][e] = v == 1 ? s[nb][e] : (v == 2 ? -3.402823466e38f : -INFINITY);
            tileMax[e >> 1] = fmaxf(tileMax[e >> 1], s[nb][e]);
        }
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        tileMax[r] = fmaxf(tileMax[r], __shfl_xor_sync(0xffffffffu, tileMax[r], 1));
        tileMax[r] = fmaxf(tileMax[r], __shfl_xor_sync(0xffffffffu, tileMax[r], 2));
        const float mNew = fmaxf(m[r], tileMax[r]);
        alpha[r] = expf(m[r] - mNew);
        m[r] = mNew;
        l[r] *= alpha[r];
    }
#pragma unroll
    for (int nb = 0; nb < 8; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            s[nb][e] = expf(s[nb][e] - m[e >> 1]);
            l[e >> 1] += s[nb][e];
            o[nb][e] *= alpha[e >> 1];
        }
}

static __device__ __forceinline__ void fa_stage(unsigned char* dst, const float* base, size_t ld, int row0, int S,
                                                float scale) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int f = threadIdx.x + i * 128;     // float4 index within the 64 x 64 tile
        const int r = f >> 4;
        const int c4 = f & 15;
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (row0 + r < S) v = *reinterpret_cast<const float4*>(base + (size_t) (row0 + r) * ld + c4 * 4);
        *reinterpret_cast<uint2*>(dst + r * FA_ROW + c4 * 8) =
            make_uint2(fa_pack(v.x * scale, v.y * scale), fa_pack(v.z * scale, v.w * scale));
    }
}

// The same staging for bf16 activations: rows are copied as they are (8 bf16 per 16-byte load), Q scaled by a
// power of two, which is exact in bf16.
static __device__ __forceinline__ void fa_stage_bf16(unsigned char* dst, const __nv_bfloat16* base, size_t ld,
                                                     int row0, int S, float scale) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int f = threadIdx.x + i * 128;     // 8-element index within the 64 x 64 tile
        const int r = f >> 3;
        const int c8 = f & 7;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (row0 + r < S) v = *reinterpret_cast<const uint4*>(base + (size_t) (row0 + r) * ld + c8 * 8);
        if (scale != 1.0f) {
            unsigned* w = reinterpret_cast<unsigned*>(&v);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                float2 f2 = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&w[j]));
                w[j] = fa_pack(f2.x * scale, f2.y * scale);
            }
        }
        *reinterpret_cast<uint4*>(dst + r * FA_ROW + c8 * 16) = v;
    }
}

// Body of the BF16 kernels: BF16IO false reads FP32 qkv and writes FP32 context (rounding as it stages), true
// reads and writes bf16 (the bf16-resident activations of BF16 mode with cuBLASLt).
template <bool BF16IO>
__device__ __forceinline__ void attention_bf16_body(const void* __restrict__ qkvRaw, const int* __restrict__ mask,
                                                    void* __restrict__ ctxRaw, int S, int H) {
    constexpr int D = 64;
    __shared__ __align__(128) unsigned char Qs[64 * FA_ROW];
    __shared__ __align__(128) unsigned char Ks[64 * FA_ROW];
    __shared__ __align__(128) unsigned char Vs[64 * FA_ROW];
    __shared__ int valid[64];

    const int b = blockIdx.z;
    const int h = blockIdx.y;
    const int q0 = blockIdx.x * 64;
    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int g = lane >> 2;
    const int q = lane & 3;
    const size_t ld = (size_t) 3 * H * D;
    const size_t headOffset = (size_t) b * S * ld + (size_t) h * D;
    const float* base = BF16IO ? nullptr : static_cast<const float*>(qkvRaw) + headOffset;
    const __nv_bfloat16* base16 = BF16IO ? static_cast<const __nv_bfloat16*>(qkvRaw) + headOffset : nullptr;

    if (BF16IO) {
        fa_stage_bf16(Qs, base16, ld, q0, S, 0.125f);
    } else {
        fa_stage(Qs, base, ld, q0, S, 0.125f);   // 1/sqrt(64), exact in any precision
    }
    __syncthreads();
    unsigned qa[4][4];
    const unsigned qBase = static_cast<unsigned>(__cvta_generic_to_shared(Qs));
    const unsigned kBase = static_cast<unsigned>(__cvta_generic_to_shared(Ks));
    const unsigned vBase = static_cast<unsigned>(__cvta_generic_to_shared(Vs));
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
        fa_ldmatrix(qBase + (warp * 16 + (lane & 15)) * FA_ROW + ks * 32 + (lane >> 4) * 16, qa[ks][0], qa[ks][1],
                    qa[ks][2], qa[ks][3]);
    }

    float o[8][4];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[i][e] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY};
    float l[2] = {0.0f, 0.0f};

    for (int k0 = 0; k0 < S; k0 += 64) {
        __syncthreads();   // the previous tile is consumed
        if (BF16IO) {
            fa_stage_bf16(Ks, base16 + (size_t) H * D, ld, k0, S, 1.0f);
            fa_stage_bf16(Vs, base16 + (size_t) 2 * H * D, ld, k0, S, 1.0f);
        } else {
            fa_stage(Ks, base + (size_t) H * D, ld, k0, S, 1.0f);
            fa_stage(Vs, base + (size_t) 2 * H * D, ld, k0, S, 1.0f);
        }
        if (tid < 64) {
            const int j = k0 + tid;
            valid[tid] = j >= S ? 0 : (mask == nullptr || mask[(size_t) b * S + j] != 0) ? 1 : 2;
        }
        __syncthreads();

        float s[8][4];
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[i][e] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
#pragma unroll
            for (int np = 0; np < 4; ++np) {
                unsigned b0, b1, b2, b3;
                fa_ldmatrix(kBase + (np * 16 + (lane >> 4) * 8 + (lane & 7)) * FA_ROW + ks * 32 +
                                ((lane >> 3) & 1) * 16,
                            b0, b1, b2, b3);
                fa_mma(s[2 * np], qa[ks][0], qa[ks][1], qa[ks][2], qa[ks][3], b0, b1);
                fa_mma(s[2 * np + 1], qa[ks][0], qa[ks][1], qa[ks][2], qa[ks][3], b2, b3);
            }
        }

        fa_online_softmax(s, o, m, l, valid, q);

#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            const unsigned a0 = fa_pack(s[2 * kk][0], s[2 * kk][1]);
            const unsigned a1 = fa_pack(s[2 * kk][2], s[2 * kk][3]);
            const unsigned a2 = fa_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            const unsigned a3 = fa_pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
            for (int nb = 0; nb < 8; nb += 2) {
                unsigned b0, b1, b2, b3;
                fa_ldmatrix_trans(vBase + (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * FA_ROW +
                                      (nb * 8 + (lane >> 4) * 8) * 2,
                                  b0, b1, b2, b3);
                fa_mma(o[nb], a0, a1, a2, a3, b0, b1);
                fa_mma(o[nb + 1], a0, a1, a2, a3, b2, b3);
            }
        }
    }

#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int s = q0 + warp * 16 + g + r * 8;
        if (s >= S) continue;
        const float inv = 1.0f / l[r];
        const size_t outOffset = ((size_t) b * S + s) * H * D + (size_t) h * D;
        if (BF16IO) {
            __nv_bfloat16* out = static_cast<__nv_bfloat16*>(ctxRaw) + outOffset;
#pragma unroll
            for (int nb = 0; nb < 8; ++nb) {
                *reinterpret_cast<unsigned*>(out + nb * 8 + 2 * q) = fa_pack(o[nb][r * 2] * inv,
                                                                             o[nb][r * 2 + 1] * inv);
            }
        } else {
            float* out = static_cast<float*>(ctxRaw) + outOffset;
#pragma unroll
            for (int nb = 0; nb < 8; ++nb) {
                *reinterpret_cast<float2*>(out + nb * 8 + 2 * q) = make_float2(o[nb][r * 2] * inv,
                                                                               o[nb][r * 2 + 1] * inv);
            }
        }
    }
}

// Grid (ceil(S / 64), H, B), 128 threads. Head size exactly 64; qkv rows 16-byte aligned (H·64 floats apart).
extern "C" __global__ void __launch_bounds__(128)
attention_bf16_d64(const float* __restrict__ qkv, const int* __restrict__ mask, float* __restrict__ ctx, int S,
                   int H) {
    attention_bf16_body<false>(qkv, mask, ctx, S, H);
}

// As attention_bf16_d64 on bf16 qkv [B·S, 3·H·64] and bf16 context [B·S, H·64].
extern "C" __global__ void __launch_bounds__(128)
attention_bf16io_d64(const __nv_bfloat16* __restrict__ qkv, const int* __restrict__ mask,
                     __nv_bfloat16* __restrict__ ctx, int S, int H) {
    attention_bf16_body<true>(qkv, mask, ctx, S, H);
}

// ---------------------------------------------------------------------------------------------------------------------
// TF32 tensor-core variant for head size 64, used when linear layers run in TF32.
//
// Same tiling as attention_bf16_d64 (4 warps, 16 queries per warp, key tiles of 64, online softmax on the FP32
// accumulators), with mma m16n8k8 on TF32 operands. Q, K, V and P are rounded to TF32 (cvt.rna: nearest, ties
// away) rather than truncated: relative error ~2^-11 per operand, about 8x below bf16.
//   - Q fragments come straight from global memory (once per block, scaled by 1/8, exact).
//   - K and V are staged as FP32 rows of 64 + 4 pad floats: with 68-float rows the 32 lanes of a fragment load
//     (8 rows g x 4 columns q) fall in 32 distinct banks for K (68g + q) and for V (68·2q + g).
//   - P to A fragment without shuffles: the accumulator gives lane (g, q) keys 2q and 2q+1 of an 8-key block,
//     the A fragment wants k columns q and q+4. A sum over keys does not depend on their order, so the P·V step
//     reads logical k = q as key 2q and k = q + 4 as key 2q + 1, and fetches V rows in that same order.
// ---------------------------------------------------------------------------------------------------------------------

#define TA_LD 68   // floats per staged K / V row

static __device__ __forceinline__ unsigned ta_tf32(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}

static __device__ __forceinline__ void ta_mma(float c[4], const unsigned a[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Stores rows [row0, row0+64) of one operand as TF32 bit patterns, TA_LD floats per row (zeros past S).
static __device__ __forceinline__ void ta_stage(unsigned* dst, const float* base, size_t ld, int row0, int S) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int f = threadIdx.x + i * 128;
        const int r = f >> 4;
        const int c4 = f & 15;
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (row0 + r < S) v = *reinterpret_cast<const float4*>(base + (size_t) (row0 + r) * ld + c4 * 4);
        *reinterpret_cast<uint4*>(dst + r * TA_LD + c4 * 4) = make_uint4(ta_tf32(v.x), ta_tf32(v.y), ta_tf32(v.z),
                                                                          ta_tf32(v.w));
    }
}

// Grid (ceil(S / 64), H, B), 128 threads. Head size exactly 64; qkv rows 16-byte aligned (H·64 floats apart).
extern "C" __global__ void __launch_bounds__(128)
attention_tf32_d64(const float* __restrict__ qkv, const int* __restrict__ mask, float* __restrict__ ctx, int S,
                   int H) {
    constexpr int D = 64;
    __shared__ __align__(16) unsigned Ks[64 * TA_LD];
    __shared__ __align__(16) unsigned Vs[64 * TA_LD];
    __shared__ int valid[64];

    const int b = blockIdx.z;
    const int h = blockIdx.y;
    const int q0 = blockIdx.x * 64;
    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int g = lane >> 2;
    const int q = lane & 3;
    const size_t ld = (size_t) 3 * H * D;
    const float* base = qkv + (size_t) b * S * ld + (size_t) h * D;

    // A fragments of Q (rows g, g+8 of the warp's 16; columns q, q+4 of each 8-wide k step).
    unsigned qa[8][4];
    {
        const int r0 = q0 + warp * 16 + g;
        const int r1 = r0 + 8;
#pragma unroll
        for (int ks = 0; ks < 8; ++ks) {
            const int c = ks * 8 + q;
            qa[ks][0] = ta_tf32(r0 < S ? base[(size_t) r0 * ld + c] * 0.125f : 0.0f);
            qa[ks][1] = ta_tf32(r1 < S ? base[(size_t) r1 * ld + c] * 0.125f : 0.0f);
            qa[ks][2] = ta_tf32(r0 < S ? base[(size_t) r0 * ld + c + 4] * 0.125f : 0.0f);
            qa[ks][3] = ta_tf32(r1 < S ? base[(size_t) r1 * ld + c + 4] * 0.125f : 0.0f);
        }
    }

    float o[8][4];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[i][e] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY};
    float l[2] = {0.0f, 0.0f};

    for (int k0 = 0; k0 < S; k0 += 64) {
        __syncthreads();   // the previous tile is consumed
        ta_stage(Ks, base + (size_t) H * D, ld, k0, S);
        ta_stage(Vs, base + (size_t) 2 * H * D, ld, k0, S);
        if (tid < 64) {
            const int j = k0 + tid;
            valid[tid] = j >= S ? 0 : (mask == nullptr || mask[(size_t) b * S + j] != 0) ? 1 : 2;
        }
        __syncthreads();

        float s[8][4];
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[i][e] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < 8; ++ks) {
#pragma unroll
            for (int nb = 0; nb < 8; ++nb) {
                const unsigned* k = Ks + (nb * 8 + g) * TA_LD + ks * 8 + q;
                ta_mma(s[nb], qa[ks], k[0], k[4]);
            }
        }

        fa_online_softmax(s, o, m, l, valid, q);

#pragma unroll
        for (int kk = 0; kk < 8; ++kk) {
            // Logical k = q is key 2q (accumulator element 0 / 2), k = q + 4 is key 2q + 1 (element 1 / 3).
            const unsigned a[4] = {ta_tf32(s[kk][0]), ta_tf32(s[kk][2]), ta_tf32(s[kk][1]), ta_tf32(s[kk][3])};
            const unsigned* v = Vs + (kk * 8 + 2 * q) * TA_LD + g;
#pragma unroll
            for (int nb = 0; nb < 8; ++nb) ta_mma(o[nb], a, v[nb * 8], v[TA_LD + nb * 8]);
        }
    }

#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int s = q0 + warp * 16 + g + r * 8;
        if (s >= S) continue;
        const float inv = 1.0f / l[r];
        float* out = ctx + ((size_t) b * S + s) * H * D + (size_t) h * D;
#pragma unroll
        for (int nb = 0; nb < 8; ++nb) {
            *reinterpret_cast<float2*>(out + nb * 8 + 2 * q) = make_float2(o[nb][r * 2] * inv, o[nb][r * 2 + 1] * inv);
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------------
// Flash attention on bf16 activations, head size 64: the kernel BF16 mode runs when gpupool.kernels.attention
// selects it. Same inputs, outputs and masked-row semantics as attention_bf16io_d64; what differs is how the
// work is laid out, so that shared-memory traffic and load latency stop bounding it:
//
//   block = WARPS warps, BM = 16·MT·WARPS queries of one (head, batch);  warp w owns [16·MT·w, 16·MT·(w+1))
//   as MT m-tiles of 16 rows: every K / V fragment a warp reads from shared memory feeds MT mma instead of one.
//
//   shared: K[2][64 keys][144 B], V[2][64][144 B]  (two stages; Q is staged once through stage 1 before the
//           loop, BM ≤ 128 rows of 144 B: at most the 18 432 B of K[1] + V[1])
//
//   prologue  cp.async Q -> stage 1, tile 0 of K, V -> stage 0; wait; Q fragments -> registers
//   tile t    wait for tile t, one barrier (it also counts the real keys of tile t, see below);
//             cp.async tile t+1 into the other stage (it overlaps with the math of tile t);
//             S = Q·Kᵀ (mma m16n8k16, FP32 accumulators); online softmax in base 2; O += P·V (P from registers)
//
// Rows past S are zero-filled by cp.async (src-size 0), so a missing V row contributes 0·0, never a NaN.
// Softmax in base 2, with the running maximum m kept in score units: p = 2^(score·log2(e) - m·log2(e)), one FMA
// and ex2.approx (relative error ~2^-22, far below the bf16 rounding of P).
// Masking: the mask is per key, so every row of a block sees the same keys. If the sequence has a real key,
// a padding key's weight is exactly 0 in the reference (exp(-FLT_MAX - max) underflows), so it scores -inf here;
// if it has none (a fully masked row, uniform over its S keys in transformers), padding keys score 0, which gives
// the same uniform average. Keys past S always score -inf. The prologue finds out which case holds
// (__syncthreads_or over the mask), the barrier of tile t counts its real keys (__syncthreads_count): a tile of 64
// real keys skips the mask selects, and a tile without a real key in a sequence that has one is skipped outright
// (all its weights are 0). So every tile that is computed has a finite maximum.
// ---------------------------------------------------------------------------------------------------------------------

#define FL_STAGE (64 * FA_ROW)   // bytes of one 64-row K or V stage

static __device__ __forceinline__ void fl_cp_async16(unsigned dst, const void* src, bool fill) {
    const int bytes = fill ? 16 : 0;   // 0: the 16 destination bytes are zero-filled, nothing is read
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}

static __device__ __forceinline__ void fl_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

static __device__ __forceinline__ void fl_cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

static __device__ __forceinline__ float fl_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// Issues the cp.async copies of `rows` rows (from row0) of one operand into dst (FA_ROW bytes per row), spread
// over THREADS threads.
template <int ROWS, int THREADS>
__device__ __forceinline__ void fl_load_rows(unsigned dst, const __nv_bfloat16* base, size_t ld, int row0, int S) {
    static_assert(ROWS * 8 % THREADS == 0, "whole chunks per thread");
#pragma unroll
    for (int i = 0; i < ROWS * 8 / THREADS; ++i) {
        const int f = threadIdx.x + i * THREADS;   // 16-byte chunk: row f / 8, chunk f % 8
        const int r = f >> 3;
        const int c = f & 7;
        const bool in = row0 + r < S;
        const __nv_bfloat16* src = base + (size_t) (in ? row0 + r : 0) * ld + c * 8;
        fl_cp_async16(dst + r * FA_ROW + c * 16, src, in);
    }
}

// 0 past the sequence, 2 padding, 1 real.
static __device__ __forceinline__ int fl_key_kind(const int* mask, int b, int S, int j) {
    return j >= S ? 0 : (mask == nullptr || mask[(size_t) b * S + j] != 0) ? 1 : 2;
}

template <int MT, int WARPS>
__device__ __forceinline__ void flash_attention_bf16io_body(const __nv_bfloat16* __restrict__ qkv,
                                                            const int* __restrict__ mask,
                                                            __nv_bfloat16* __restrict__ ctx, int S, int H) {
    constexpr int D = 64;
    constexpr int THREADS = 32 * WARPS;
    constexpr int BM = 16 * MT * WARPS;
    constexpr float LOG2E = 1.4426950408889634f;
    static_assert(BM * FA_ROW <= 2 * FL_STAGE, "Q must fit in stage 1 of K and V");
    __shared__ __align__(128) unsigned char kv[4 * FL_STAGE];   // K0 V0 K1 V1
    __shared__ int kinds[2][64];

    const int b = blockIdx.z;
    const int h = blockIdx.y;
    const int q0 = blockIdx.x * BM;
    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int q = lane & 3;
    const size_t ld = (size_t) 3 * H * D;
    const __nv_bfloat16* qBase = qkv + (size_t) b * S * ld + (size_t) h * D;
    const __nv_bfloat16* kBase = qBase + (size_t) H * D;
    const __nv_bfloat16* vBase = qBase + (size_t) 2 * H * D;
    const unsigned smem = static_cast<unsigned>(__cvta_generic_to_shared(kv));
    // stage s: K at smem + 2s·FL_STAGE, V right after it
    const int tiles = (S + 63) / 64;

    fl_load_rows<BM, THREADS>(smem + 2 * FL_STAGE, qBase, ld, q0, S);
    fl_load_rows<64, THREADS>(smem, kBase, ld, 0, S);
    fl_load_rows<64, THREADS>(smem + FL_STAGE, vBase, ld, 0, S);
    fl_cp_async_commit();
    int myKind = tid < 64 ? fl_key_kind(mask, b, S, tid) : 0;
    if (tid < 64) kinds[0][tid] = myKind;
    bool realSeen = mask == nullptr;
    for (int j = tid; j < S && !realSeen; j += THREADS) realSeen = mask[(size_t) b * S + j] != 0;
    fl_cp_async_wait_all();
    const bool anyReal = __syncthreads_or(realSeen);
    const float paddingScore = anyReal ? -INFINITY : 0.0f;

    // Q fragments, scaled by 1/√64 = 2^-3 (exact in bf16).
    unsigned qa[MT][4][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
            fa_ldmatrix(smem + 2 * FL_STAGE + ((warp * MT + mt) * 16 + (lane & 15)) * FA_ROW + ks * 32 +
                            (lane >> 4) * 16,
                        qa[mt][ks][0], qa[mt][ks][1], qa[mt][ks][2], qa[mt][ks][3]);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                float2 f = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&qa[mt][ks][e]));
                qa[mt][ks][e] = fa_pack(f.x * 0.125f, f.y * 0.125f);
            }
        }

    float o[MT][8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) o[mt][i][e] = 0.0f;
    float m[MT][2];   // running row maxima, score units
    float l[MT][2];   // this lane's part of the running row sums
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.0f;
    }

    for (int t = 0; t < tiles; ++t) {
        const int cur = t & 1;
        fl_cp_async_wait_all();
        // Tile t is in stage cur and kinds[cur] (written before the previous barrier or in the prologue); every
        // warp is done with stage cur ^ 1 (tile t - 1, or Q on the first pass).
        const int real = __syncthreads_count(tid < 64 && myKind == 1);
        if (t + 1 < tiles) {
            const int k1 = (t + 1) * 64;
            const unsigned next = smem + 2 * (cur ^ 1) * FL_STAGE;
            fl_load_rows<64, THREADS>(next, kBase, ld, k1, S);
            fl_load_rows<64, THREADS>(next + FL_STAGE, vBase, ld, k1, S);
            fl_cp_async_commit();
            if (tid < 64) {
                myKind = fl_key_kind(mask, b, S, k1 + tid);
                kinds[cur ^ 1][tid] = myKind;
            }
        }
        if (real == 0 && anyReal) continue;   // no real key, but the sequence has one: every weight is 0
        const unsigned kS = smem + 2 * cur * FL_STAGE;
        const unsigned vS = kS + FL_STAGE;

        float s[MT][8][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[mt][i][e] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
#pragma unroll
            for (int np = 0; np < 4; ++np) {
                unsigned b0, b1, b2, b3;
                fa_ldmatrix(kS + (np * 16 + (lane >> 4) * 8 + (lane & 7)) * FA_ROW + ks * 32 + ((lane >> 3) & 1) * 16,
                            b0, b1, b2, b3);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    fa_mma(s[mt][2 * np], qa[mt][ks][0], qa[mt][ks][1], qa[mt][ks][2], qa[mt][ks][3], b0, b1);
                    fa_mma(s[mt][2 * np + 1], qa[mt][ks][0], qa[mt][ks][1], qa[mt][ks][2], qa[mt][ks][3], b2, b3);
                }
            }

        // Masks only where the tile is not 64 real keys.
        if (real != 64) {
#pragma unroll
            for (int nb = 0; nb < 8; ++nb)
#pragma unroll
                for (int e2 = 0; e2 < 2; ++e2) {
                    const int kind = kinds[cur][nb * 8 + 2 * q + e2];
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                        for (int r = 0; r < 2; ++r) {
                            float& x = s[mt][nb][r * 2 + e2];
                            x = kind == 1 ? x : (kind == 2 ? paddingScore : -INFINITY);
                        }
                }
        }

#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            float alpha[2], shift[2];
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                float mx = m[mt][r];
#pragma unroll
                for (int nb = 0; nb < 8; ++nb) mx = fmaxf(mx, fmaxf(s[mt][nb][2 * r], s[mt][nb][2 * r + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));   // finite (see the comment above)
                shift[r] = -mx * LOG2E;
                alpha[r] = fl_exp2(fmaf(m[mt][r], LOG2E, shift[r]));  // 0 on the first tile (m = -inf)
                m[mt][r] = mx;
            }
            float sum[2] = {0.0f, 0.0f};
#pragma unroll
            for (int nb = 0; nb < 8; ++nb)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    s[mt][nb][e] = fl_exp2(fmaf(s[mt][nb][e], LOG2E, shift[e >> 1]));
                    sum[e >> 1] += s[mt][nb][e];
                    o[mt][nb][e] *= alpha[e >> 1];
                }
            l[mt][0] = l[mt][0] * alpha[0] + sum[0];
            l[mt][1] = l[mt][1] * alpha[1] + sum[1];
        }

        // O += P·V: two neighbouring 8-key blocks of P accumulators are the A fragment of one 16-key step.
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            unsigned a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                a[mt][0] = fa_pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                a[mt][1] = fa_pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                a[mt][2] = fa_pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                a[mt][3] = fa_pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
            }
#pragma unroll
            for (int nb = 0; nb < 8; nb += 2) {
                unsigned b0, b1, b2, b3;
                fa_ldmatrix_trans(vS + (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * FA_ROW +
                                      (nb * 8 + (lane >> 4) * 8) * 2,
                                  b0, b1, b2, b3);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    fa_mma(o[mt][nb], a[mt][0], a[mt][1], a[mt][2], a[mt][3], b0, b1);
                    fa_mma(o[mt][nb + 1], a[mt][0], a[mt][1], a[mt][2], a[mt][3], b2, b3);
                }
            }
        }
    }

    const int g = lane >> 2;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float sum = l[mt][r];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            const int row = q0 + (warp * MT + mt) * 16 + g + r * 8;
            if (row >= S) continue;
            const float inv = 1.0f / sum;
            __nv_bfloat16* out = ctx + ((size_t) b * S + row) * H * D + (size_t) h * D;
#pragma unroll
            for (int nb = 0; nb < 8; ++nb) {
                *reinterpret_cast<unsigned*>(out + nb * 8 + 2 * q) =
                    fa_pack(o[mt][nb][r * 2] * inv, o[mt][nb][r * 2 + 1] * inv);
            }
        }
}

// Grid (ceil(S / 128), H, B), 128 threads: 32 queries per warp. bf16 qkv [B·S, 3·H·64], bf16 ctx [B·S, H·64].
extern "C" __global__ void __launch_bounds__(128)
flash_attention_bf16io_d64_q128(const __nv_bfloat16* __restrict__ qkv, const int* __restrict__ mask,
                                __nv_bfloat16* __restrict__ ctx, int S, int H) {
    flash_attention_bf16io_body<2, 4>(qkv, mask, ctx, S, H);
}

// Grid (ceil(S / 64), H, B), 128 threads: 16 queries per warp, for grids the 128-query tiles would leave short of
// the multiprocessors. At most 128 registers, so that four blocks share a multiprocessor.
extern "C" __global__ void __launch_bounds__(128, 4)
flash_attention_bf16io_d64_q64(const __nv_bfloat16* __restrict__ qkv, const int* __restrict__ mask,
                               __nv_bfloat16* __restrict__ ctx, int S, int H) {
    flash_attention_bf16io_body<1, 4>(qkv, mask, ctx, S, H);
}

// Grid (ceil(S / 128), H, B), 256 threads: 16 queries per warp, 8 warps sharing each K/V tile (half the loads per
// query of the 64-query blocks, at the register budget of two blocks per SM).
extern "C" __global__ void __launch_bounds__(256, 2)
flash_attention_bf16io_d64_q128w8(const __nv_bfloat16* __restrict__ qkv, const int* __restrict__ mask,
                                  __nv_bfloat16* __restrict__ ctx, int S, int H) {
    flash_attention_bf16io_body<1, 8>(qkv, mask, ctx, S, H);
}

// ---------------------------------------------------------------------------------------------------------------------
// FP32 attention for head size 64 with register tiles: exact single precision (no tensor cores), the kernel FP32
// mode runs when gpupool.kernels.attention selects it. Same inputs, outputs and masking as attention_d64.
//
// attention_d64 computes each score alone (two shared-memory loads per FMA), which bounds it by shared memory.
// Here each thread owns a 4 x 4 block of scores and a 4 x 8 block of the output, so a load feeds 4 to 8 FMAs:
//
//   block = 128 threads, 64 queries, key tiles of 32;  thread (tr, tc) = (tid / 8, tid % 8)
//   scores:  queries tr + 16i (i < 4)  x  keys tc + 8j (j < 4)     the 8 lanes of one tr share its rows:
//   output:  queries tr + 16i          x  columns 4tc + 32h + (0..3), h < 2          shuffles over xor 1, 2, 4
//
//   shared (floats): Q [64][68], K [32][68] (row = key, d contiguous; 68: the float4 loads of 8 lanes for 8
//   different rows fall in distinct banks), V [32][64], P [64][40] (row = query; 40: the 4 rows a warp reads
//   start in different banks). P is exchanged within a warp only (lanes of one tr write and read its rows).
//
// Per key tile t (cp.async: V of tile t and K of tile t+1 are in flight while the other product runs):
//   1. wait for K_t; barrier; scores = Q·K_tᵀ / 8; mask (-FLT_MAX padding, -inf past S); online softmax as in
//      attention_tile (expf, FP32), p -> P
//   2. wait for V_t; barrier; issue K_{t+1};  O = O·alpha + P·V_t
//   3. barrier; issue V_{t+1}
// ---------------------------------------------------------------------------------------------------------------------

#define AT_QLD 68
#define AT_PLD 40

extern "C" __global__ void __launch_bounds__(128)
attention_d64_tiled(const float* __restrict__ qkv, const int* __restrict__ mask, float* __restrict__ ctx, int S,
                    int H) {
    constexpr int D = 64;
    constexpr int KT = 32;
    __shared__ __align__(16) float Qs[64 * AT_QLD];
    __shared__ __align__(16) float Ks[KT * AT_QLD];
    __shared__ __align__(16) float Vs[KT * D];
    __shared__ __align__(16) float Ps[64 * AT_PLD];
    __shared__ int kinds[KT];

    const int b = blockIdx.z;
    const int h = blockIdx.y;
    const int q0 = blockIdx.x * 64;
    const int tid = threadIdx.x;
    const int tr = tid >> 3;
    const int tc = tid & 7;
    const size_t ld = (size_t) 3 * H * D;
    const float* qBase = qkv + (size_t) b * S * ld + (size_t) h * D;
    const float* kBase = qBase + (size_t) H * D;
    const float* vBase = qBase + (size_t) 2 * H * D;
    const unsigned qS = static_cast<unsigned>(__cvta_generic_to_shared(Qs));
    const unsigned kS = static_cast<unsigned>(__cvta_generic_to_shared(Ks));
    const unsigned vS = static_cast<unsigned>(__cvta_generic_to_shared(Vs));
    const int tiles = (S + KT - 1) / KT;

    // 16-byte chunk f of a tile: row f / 16, column 4·(f % 16)
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int f = tid + i * 128;
        const int r = f >> 4, c = f & 15;
        const bool in = q0 + r < S;
        fl_cp_async16(qS + (r * AT_QLD + c * 4) * 4, qBase + (size_t) (in ? q0 + r : 0) * ld + c * 4, in);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int f = tid + i * 128;
        const int r = f >> 4, c = f & 15;
        const bool in = r < S;
        fl_cp_async16(kS + (r * AT_QLD + c * 4) * 4, kBase + (size_t) (in ? r : 0) * ld + c * 4, in);
    }
    fl_cp_async_commit();   // group: Q and K_0
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int f = tid + i * 128;
        const int r = f >> 4, c = f & 15;
        const bool in = r < S;
        fl_cp_async16(vS + (r * D + c * 4) * 4, vBase + (size_t) (in ? r : 0) * ld + c * 4, in);
    }
    fl_cp_async_commit();   // group: V_0
    if (tid < KT) kinds[tid] = fl_key_kind(mask, b, S, tid);

    float acc[4][8];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[i][c] = 0.0f;
    float m[4], l[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }

    for (int t = 0; t < tiles; ++t) {
        asm volatile("cp.async.wait_group 1;\n" ::: "memory");   // K_t (and Q) landed; V_t may still be in flight
        __syncthreads();

        float sc[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) sc[i][j] = 0.0f;
#pragma unroll 4
        for (int d4 = 0; d4 < D / 4; ++d4) {
            float4 qv[4], kv[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) qv[i] = *reinterpret_cast<const float4*>(&Qs[(tr + 16 * i) * AT_QLD + d4 * 4]);
#pragma unroll
            for (int j = 0; j < 4; ++j) kv[j] = *reinterpret_cast<const float4*>(&Ks[(tc + 8 * j) * AT_QLD + d4 * 4]);
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    float x = sc[i][j];
                    x = fmaf(qv[i].x, kv[j].x, x);
                    x = fmaf(qv[i].y, kv[j].y, x);
                    x = fmaf(qv[i].z, kv[j].z, x);
                    x = fmaf(qv[i].w, kv[j].w, x);
                    sc[i][j] = x;
                }
        }

        int kind[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) kind[j] = kinds[tc + 8 * j];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float x = sc[i][j] * 0.125f;   // 1/√64, exact
                sc[i][j] = kind[j] == 1 ? x : (kind[j] == 2 ? -3.402823466e38f : -INFINITY);
                mx = fmaxf(mx, sc[i][j]);
            }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
            const float mNew = fmaxf(m[i], mx);   // finite: tile t has a key below S
            const float alpha = expf(m[i] - mNew);
            m[i] = mNew;
            float sum = 0.0f;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float p = expf(sc[i][j] - mNew);
                Ps[(tr + 16 * i) * AT_PLD + tc + 8 * j] = p;
                sum += p;
            }
            l[i] = l[i] * alpha + sum;
#pragma unroll
            for (int c = 0; c < 8; ++c) acc[i][c] *= alpha;
        }

        fl_cp_async_wait_all();   // V_t landed
        __syncthreads();          // every warp is done with K_t and kinds; P rows are visible within the warp
        if (t + 1 < tiles) {
            const int k1 = (t + 1) * KT;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int f = tid + i * 128;
                const int r = f >> 4, c = f & 15;
                const bool in = k1 + r < S;
                fl_cp_async16(kS + (r * AT_QLD + c * 4) * 4, kBase + (size_t) (in ? k1 + r : 0) * ld + c * 4, in);
            }
            fl_cp_async_commit();   // group: K_{t+1}
            if (tid < KT) kinds[tid] = fl_key_kind(mask, b, S, k1 + tid);
        }

#pragma unroll 2
        for (int j4 = 0; j4 < KT / 4; ++j4) {
            float4 pv[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) pv[i] = *reinterpret_cast<const float4*>(&Ps[(tr + 16 * i) * AT_PLD + j4 * 4]);
#pragma unroll
            for (int jl = 0; jl < 4; ++jl) {
                const int j = j4 * 4 + jl;
                const float4 v0 = *reinterpret_cast<const float4*>(&Vs[j * D + tc * 4]);
                const float4 v1 = *reinterpret_cast<const float4*>(&Vs[j * D + 32 + tc * 4]);
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const float p = jl == 0 ? pv[i].x : jl == 1 ? pv[i].y : jl == 2 ? pv[i].z : pv[i].w;
                    acc[i][0] = fmaf(p, v0.x, acc[i][0]);
                    acc[i][1] = fmaf(p, v0.y, acc[i][1]);
                    acc[i][2] = fmaf(p, v0.z, acc[i][2]);
                    acc[i][3] = fmaf(p, v0.w, acc[i][3]);
                    acc[i][4] = fmaf(p, v1.x, acc[i][4]);
                    acc[i][5] = fmaf(p, v1.y, acc[i][5]);
                    acc[i][6] = fmaf(p, v1.z, acc[i][6]);
                    acc[i][7] = fmaf(p, v1.w, acc[i][7]);
                }
            }
        }

        __syncthreads();   // every warp is done with V_t and its P rows
        if (t + 1 < tiles) {
            const int k1 = (t + 1) * KT;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int f = tid + i * 128;
                const int r = f >> 4, c = f & 15;
                const bool in = k1 + r < S;
                fl_cp_async16(vS + (r * D + c * 4) * 4, vBase + (size_t) (in ? k1 + r : 0) * ld + c * 4, in);
            }
        }
        fl_cp_async_commit();   // group: V_{t+1} (empty after the last tile, so "wait_group 1" above stays right)
    }

#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float sum = l[i];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        sum += __shfl_xor_sync(0xffffffffu, sum, 4);
        const int row = q0 + tr + 16 * i;
        if (row >= S) continue;
        const float inv = 1.0f / sum;
        float* out = ctx + ((size_t) b * S + row) * H * D + (size_t) h * D;
        *reinterpret_cast<float4*>(out + tc * 4) =
            make_float4(acc[i][0] * inv, acc[i][1] * inv, acc[i][2] * inv, acc[i][3] * inv);
        *reinterpret_cast<float4*>(out + 32 + tc * 4) =
            make_float4(acc[i][4] * inv, acc[i][5] * inv, acc[i][6] * inv, acc[i][7] * inv);
    }
}
