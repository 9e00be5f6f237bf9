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
static __device__ __forceinline__ void attention_tile(const float* __restrict__ qkv, const int* __restrict__ mask,
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
