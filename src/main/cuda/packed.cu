// Kernels over packed sequences (dynamic batching without padding): the tokens of several sequences of
// different lengths are rows of one [T, H] matrix; sequence i occupies rows offsets[i] .. offsets[i+1]-1
// (offsets: N+1 cumulative row counts, offsets[0] = 0, offsets[N] <= T). A sequence may be empty and rows from
// offsets[N] on belong to no sequence: a CUDA graph replayed for every batch of its bucket runs at the bucket's
// N and T, the padding being empty sequences and a tail of rows (model/bert/PackedPadding); no kernel reads a row
// outside the sequence it works on. Each kernel has an FP32 form and a bf16 one (suffix _bf16:
// bf16 activations in and out, as BF16 mode with cuBLASLt holds them); arithmetic is FP32 in both, and the bf16
// forms round only where they store. Embedding tables and LayerNorm parameters are FP32 in both.
#include "common.cuh"
#include <cfloat>

// out[t, :] = word[ids[t]] + position[positions[t]] + tokenType[types[t]] (types may be null: type 0).
// Grid (T), block <= 256.
extern "C" __global__ void packed_embedding_sum(const int* __restrict__ ids, const int* __restrict__ types,
                                                const int* __restrict__ positions, const float* __restrict__ word,
                                                const float* __restrict__ position,
                                                const float* __restrict__ tokenType, float* __restrict__ out,
                                                int hidden) {
    const int token = blockIdx.x;
    const float* w = word + (size_t) ids[token] * hidden;
    const float* p = position + (size_t) positions[token] * hidden;
    const float* t = tokenType + (size_t) (types == nullptr ? 0 : types[token]) * hidden;
    float* o = out + (size_t) token * hidden;
    for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
        o[c] = w[c] + p[c] + t[c];
    }
}

// out[i, :] = hidden[offsets[i], :]; zeros for an empty sequence (whose offset may be T: no row to read). Grid (N),
// block <= 256.
template <typename T>
__device__ __forceinline__ void packed_pool_cls_body(const T* __restrict__ hidden, const int* __restrict__ offsets,
                                                     T* __restrict__ out, int cols) {
    const int i = blockIdx.x;
    if (offsets[i] >= offsets[i + 1]) {
        for (int c = threadIdx.x; c < cols; c += blockDim.x) gp_store(out, (size_t) i * cols + c, 0.0f);
        return;
    }
    const T* h = hidden + (size_t) offsets[i] * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[(size_t) i * cols + c] = h[c];
}

extern "C" __global__ void packed_pool_cls(const float* __restrict__ hidden, const int* __restrict__ offsets,
                                           float* __restrict__ out, int cols) {
    packed_pool_cls_body(hidden, offsets, out, cols);
}

extern "C" __global__ void packed_pool_cls_bf16(const __nv_bfloat16* __restrict__ hidden,
                                                const int* __restrict__ offsets, __nv_bfloat16* __restrict__ out,
                                                int cols) {
    packed_pool_cls_body(hidden, offsets, out, cols);
}

// out[i, :] = mean of hidden[r, :] over sequence i's rows r whose mask is non-zero (mask may be null: all); FP32
// sums; zeros for an empty sequence (no row, count 0). Grid (N), block <= 256.
template <typename T>
__device__ __forceinline__ void packed_pool_mean_body(const T* __restrict__ hidden, const int* __restrict__ mask,
                                                      const int* __restrict__ offsets, T* __restrict__ out, int cols) {
    const int i = blockIdx.x;
    const int first = offsets[i];
    const int last = offsets[i + 1];
    float count = 0.0f;
    for (int r = first; r < last; ++r) count += (mask == nullptr || mask[r] != 0) ? 1.0f : 0.0f;
    const float inv = 1.0f / fmaxf(count, 1e-9f);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float acc = 0.0f;
        for (int r = first; r < last; ++r) {
            if (mask == nullptr || mask[r] != 0) acc += gp_load(hidden, (size_t) r * cols + c);
        }
        gp_store(out, (size_t) i * cols + c, acc * inv);
    }
}

extern "C" __global__ void packed_pool_mean(const float* __restrict__ hidden, const int* __restrict__ mask,
                                            const int* __restrict__ offsets, float* __restrict__ out, int cols) {
    packed_pool_mean_body(hidden, mask, offsets, out, cols);
}

extern "C" __global__ void packed_pool_mean_bf16(const __nv_bfloat16* __restrict__ hidden,
                                                 const int* __restrict__ mask, const int* __restrict__ offsets,
                                                 __nv_bfloat16* __restrict__ out, int cols) {
    packed_pool_mean_body(hidden, mask, offsets, out, cols);
}

struct GpPackedPosition {
    const int* positions;
    __device__ __forceinline__ int operator()(int token) const { return positions[token]; }
};

// bf16 activations only: out[t, :] = LayerNorm(word[ids[t]] + position[positions[t]] + tokenType[types[t]]) · gamma
// + beta, rounded to bf16 once. The packed form of embedding_layer_norm_bf16 (ops.cu): the same FP32 sum, mean and
// variance, with the position read from positions[] instead of t mod S. (The FP32 packed path keeps
// packed_embedding_sum + add_layer_norm.) Grid (T), block a multiple of 32, <= 1024.
extern "C" __global__ void packed_embedding_layer_norm_bf16(const int* __restrict__ ids,
                                                            const int* __restrict__ types,
                                                            const int* __restrict__ positions,
                                                            const float* __restrict__ word,
                                                            const float* __restrict__ position,
                                                            const float* __restrict__ tokenType,
                                                            const float* __restrict__ gamma,
                                                            const float* __restrict__ beta,
                                                            __nv_bfloat16* __restrict__ out, int hidden, float eps) {
    __shared__ float scratch[32];
    gp_embedding_layer_norm(ids, types, word, position, tokenType, gamma, beta, out, hidden, eps,
                            GpPackedPosition{positions}, scratch);
}

#define VA_WARPS 4
#define VA_TILE 32
#define VA_MAX_HEAD_DIM 128

// Self-attention per packed sequence. qkv [T, 3·heads·headDim] (Q, K, V blocks side by side, head-major),
// mask INT32 [T] (null: all real; a masked key gets -FLT_MAX added, as HuggingFace adds finfo.min),
// context [T, heads·headDim]. headDim <= VA_MAX_HEAD_DIM.
//
// Grid (N, heads), block VA_WARPS·32; an empty sequence's blocks find no query and return at once (every loop
// below runs to its length, and the block-wide syncs are inside them). Each warp owns one query row at a time; keys
// are walked in tiles of
// VA_TILE rows staged in shared memory (row stride headDim+1: lane j reads key j without bank conflicts):
//   1. the warp's query goes to shared memory;
//   2. per tile: lane j scores key j (q·k·scale + mask bias), the warp takes the tile's max, rescales its
//      running sum and output by exp(m_old − m_new) (online softmax), adds exp(s_j − m_new) and p_j·V_j;
//   3. context = output / sum.
// Every warp walks the same tiles, so the block synchronises around each tile load.
template <typename T>
__device__ __forceinline__ void varlen_attention_body(const T* __restrict__ qkv, const int* __restrict__ mask,
                                                      const int* __restrict__ offsets, T* __restrict__ context,
                                                      int heads, int headDim, float scale) {
    __shared__ float ks[VA_TILE][VA_MAX_HEAD_DIM + 1];
    __shared__ float vs[VA_TILE][VA_MAX_HEAD_DIM + 1];
    __shared__ float qs[VA_WARPS][VA_MAX_HEAD_DIM];
    __shared__ float bias[VA_TILE];
    const int sequence = blockIdx.x;
    const int head = blockIdx.y;
    const int start = offsets[sequence];
    const int len = offsets[sequence + 1] - start;
    const int hidden = heads * headDim;
    const size_t stride = 3 * (size_t) hidden;
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int column = head * headDim;

    for (int base = 0; base < len; base += VA_WARPS) {
        const int query = base + warp;
        const bool active = query < len;
        if (active) {
            for (int d = lane; d < headDim; d += 32) qs[warp][d] = gp_load(qkv, (size_t) (start + query) * stride + column + d);
        }
        float m = -INFINITY;
        float l = 0.0f;
        float acc[VA_MAX_HEAD_DIM / 32] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int k0 = 0; k0 < len; k0 += VA_TILE) {
            const int n = min(VA_TILE, len - k0);
            __syncthreads();
            for (int idx = threadIdx.x; idx < n * headDim; idx += blockDim.x) {
                const int j = idx / headDim;
                const int d = idx - j * headDim;
                const size_t row = (size_t) (start + k0 + j) * stride + column + d;
                ks[j][d] = gp_load(qkv, row + hidden);
                vs[j][d] = gp_load(qkv, row + 2 * (size_t) hidden);
            }
            for (int j = threadIdx.x; j < n; j += blockDim.x) {
                bias[j] = (mask == nullptr || mask[start + k0 + j] != 0) ? 0.0f : -FLT_MAX;
            }
            __syncthreads();
            if (active) {
                float s = -INFINITY;
                if (lane < n) {
                    float dot = 0.0f;
                    for (int d = 0; d < headDim; ++d) dot += qs[warp][d] * ks[lane][d];
                    s = dot * scale + bias[lane];
                }
                const float next = fmaxf(m, gp_warp_max(s));
                const float correction = expf(m - next);
                const float p = lane < n ? expf(s - next) : 0.0f;
                l = l * correction + gp_warp_sum(p);
#pragma unroll
                for (int c = 0; c < VA_MAX_HEAD_DIM / 32; ++c) acc[c] *= correction;
                for (int j = 0; j < n; ++j) {
                    const float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
                    for (int c = 0; c < VA_MAX_HEAD_DIM / 32; ++c) {
                        const int d = lane + 32 * c;
                        if (d < headDim) acc[c] += pj * vs[j][d];
                    }
                }
                m = next;
            }
        }
        if (active) {
            const float inv = 1.0f / l;
#pragma unroll
            for (int c = 0; c < VA_MAX_HEAD_DIM / 32; ++c) {
                const int d = lane + 32 * c;
                if (d < headDim) gp_store(context, (size_t) (start + query) * hidden + column + d, acc[c] * inv);
            }
        }
    }
}

extern "C" __global__ void varlen_attention(const float* __restrict__ qkv, const int* __restrict__ mask,
                                            const int* __restrict__ offsets, float* __restrict__ context,
                                            int heads, int headDim, float scale) {
    varlen_attention_body(qkv, mask, offsets, context, heads, headDim, scale);
}

// varlen_attention on bf16 qkv and context: Q, K and V widen to FP32 as they are staged, scores, softmax and the
// weighted sum stay FP32, the context rounds to bf16 once.
extern "C" __global__ void varlen_attention_bf16(const __nv_bfloat16* __restrict__ qkv, const int* __restrict__ mask,
                                                 const int* __restrict__ offsets, __nv_bfloat16* __restrict__ context,
                                                 int heads, int headDim, float scale) {
    varlen_attention_body(qkv, mask, offsets, context, heads, headDim, scale);
}
