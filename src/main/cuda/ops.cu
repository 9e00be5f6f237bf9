// Row-wise and gather kernels of the encoder: embeddings, residual + LayerNorm, pooling, softmax.
//
// Each kernel gives one block to one output row and lets the block's threads stride over the columns
// (column c is handled by thread c mod blockDim.x), so a row is read with coalesced accesses and reduced
// with gp_block_sum / gp_block_max. A thread only ever writes the columns it read itself, which is why the
// in-place variants (y == x) are safe. Block size: 256 threads (any multiple of 32 up to 1024 works).
// The *_warp LayerNorm kernels at the end give one warp to a row instead (see there).

#include "common.cuh"

// out[b, s, :] = word[ids[b, s]] + position[s] + tokenType[types[b, s]]. Grid (B·S), types may be null.
// Ids must be valid table rows; the caller checks them on the host before the copy.
extern "C" __global__ void embedding_sum(const int* __restrict__ ids, const int* __restrict__ types,
                                         const float* __restrict__ word, const float* __restrict__ position,
                                         const float* __restrict__ tokenType, float* __restrict__ out, int S,
                                         int hidden) {
    const int token = blockIdx.x;
    const int s = token % S;
    const float* w = word + (size_t) ids[token] * hidden;
    const float* p = position + (size_t) s * hidden;
    const float* t = tokenType + (size_t) (types == nullptr ? 0 : types[token]) * hidden;
    float* o = out + (size_t) token * hidden;
    for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
        o[c] = w[c] + p[c] + t[c];
    }
}

// The pre-norm value of a residual row: x[c] + residual[c] (residual may be null), in FP32.
template <typename T>
struct GpResidualRow {
    const T* x;
    const T* residual;
    __device__ __forceinline__ float operator()(int c) const {
        return gp_load(x, c) + (residual == nullptr ? 0.0f : gp_load(residual, c));
    }
};

// y = LayerNorm(x + residual) · gamma + beta, per row, population variance (as torch). Grid (rows).
// residual may be null; y may alias x or residual.
extern "C" __global__ void add_layer_norm(const float* x, const float* residual, const float* __restrict__ gamma,
                                          const float* __restrict__ beta, float* y, int cols, float eps) {
    __shared__ float scratch[32];
    const size_t offset = (size_t) blockIdx.x * cols;
    const GpResidualRow<float> row{x + offset, residual == nullptr ? nullptr : residual + offset};
    gp_block_layer_norm(row, gamma, beta, y, offset, cols, eps, scratch);
}

// out[b, :] = hidden[b, 0, :]. Grid (B).
extern "C" __global__ void pool_cls(const float* __restrict__ hidden, float* __restrict__ out, int S, int cols) {
    const float* h = hidden + (size_t) blockIdx.x * S * cols;
    float* o = out + (size_t) blockIdx.x * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) o[c] = h[c];
}

// out[b, :] = Σ_s mask[b, s] · hidden[b, s, :] / max(Σ_s mask[b, s], 1e-9) (sentence-transformers' mean
// pooling); mask may be null (all real). Grid (B).
extern "C" __global__ void pool_mean(const float* __restrict__ hidden, const int* __restrict__ mask,
                                     float* __restrict__ out, int S, int cols) {
    const int b = blockIdx.x;
    const float* h = hidden + (size_t) b * S * cols;
    float count = 0.0f;
    for (int s = 0; s < S; ++s) count += (mask == nullptr || mask[(size_t) b * S + s] != 0) ? 1.0f : 0.0f;
    const float inv = 1.0f / fmaxf(count, 1e-9f);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float acc = 0.0f;
        for (int s = 0; s < S; ++s) {
            if (mask == nullptr || mask[(size_t) b * S + s] != 0) acc += h[(size_t) s * cols + c];
        }
        out[(size_t) b * cols + c] = acc * inv;
    }
}

// y[r, :] = softmax(x[r, :]); y may alias x. Grid (rows).
extern "C" __global__ void softmax_rows(const float* x, float* y, int cols) {
    __shared__ float scratch[32];
    const size_t offset = (size_t) blockIdx.x * cols;
    const float* xr = x + offset;
    float best = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) best = fmaxf(best, xr[c]);
    best = gp_block_max(best, scratch);
    float sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(xr[c] - best);
    const float inv = 1.0f / gp_block_sum(sum, scratch);
    float* yr = y + offset;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - best) * inv;
}

// ---------------------------------------------------------------------------------------------------------------------
// Fused embeddings + LayerNorm, and the bf16 variants of the row kernels (BF16 mode with cuBLASLt keeps every
// activation in bf16; LayerNorm statistics, pooling sums and activations still compute in FP32).
// ---------------------------------------------------------------------------------------------------------------------

// out[t, :] = LayerNorm(word[ids[t]] + position[t mod S] + tokenType[types[t]]) · gamma + beta. Grid (B·S).
// The sum is formed the same way as embedding_sum + add_layer_norm (same FP32 additions in the same order), so the
// FP32 output is bit-identical to the two-kernel path; it is recomputed per pass instead of stored.
struct GpColumnPosition {
    int S;
    __device__ __forceinline__ int operator()(int token) const { return token % S; }
};

extern "C" __global__ void embedding_layer_norm(const int* __restrict__ ids, const int* __restrict__ types,
                                                const float* __restrict__ word, const float* __restrict__ position,
                                                const float* __restrict__ tokenType, const float* __restrict__ gamma,
                                                const float* __restrict__ beta, float* __restrict__ out, int S,
                                                int hidden, float eps) {
    __shared__ float scratch[32];
    gp_embedding_layer_norm(ids, types, word, position, tokenType, gamma, beta, out, hidden, eps, GpColumnPosition{S},
                            scratch);
}

extern "C" __global__ void embedding_layer_norm_bf16(const int* __restrict__ ids, const int* __restrict__ types,
                                                     const float* __restrict__ word,
                                                     const float* __restrict__ position,
                                                     const float* __restrict__ tokenType,
                                                     const float* __restrict__ gamma, const float* __restrict__ beta,
                                                     __nv_bfloat16* __restrict__ out, int S, int hidden, float eps) {
    __shared__ float scratch[32];
    gp_embedding_layer_norm(ids, types, word, position, tokenType, gamma, beta, out, hidden, eps, GpColumnPosition{S},
                            scratch);
}

// add_layer_norm on bf16 x, residual (may be null) and y (may alias either); gamma, beta FP32. Grid (rows).
extern "C" __global__ void add_layer_norm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* residual,
                                               const float* __restrict__ gamma, const float* __restrict__ beta,
                                               __nv_bfloat16* y, int cols, float eps) {
    __shared__ float scratch[32];
    const size_t offset = (size_t) blockIdx.x * cols;
    const GpResidualRow<__nv_bfloat16> row{x + offset, residual == nullptr ? nullptr : residual + offset};
    gp_block_layer_norm(row, gamma, beta, y, offset, cols, eps, scratch);
}

// pool_cls on bf16. Grid (B).
extern "C" __global__ void pool_cls_bf16(const __nv_bfloat16* __restrict__ hidden, __nv_bfloat16* __restrict__ out,
                                         int S, int cols) {
    const __nv_bfloat16* h = hidden + (size_t) blockIdx.x * S * cols;
    __nv_bfloat16* o = out + (size_t) blockIdx.x * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) o[c] = h[c];
}

// pool_mean on bf16 hidden states, FP32 sums, bf16 out. Grid (B).
extern "C" __global__ void pool_mean_bf16(const __nv_bfloat16* __restrict__ hidden, const int* __restrict__ mask,
                                          __nv_bfloat16* __restrict__ out, int S, int cols) {
    const int b = blockIdx.x;
    const __nv_bfloat16* h = hidden + (size_t) b * S * cols;
    float count = 0.0f;
    for (int s = 0; s < S; ++s) count += (mask == nullptr || mask[(size_t) b * S + s] != 0) ? 1.0f : 0.0f;
    const float inv = 1.0f / fmaxf(count, 1e-9f);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float acc = 0.0f;
        for (int s = 0; s < S; ++s) {
            if (mask == nullptr || mask[(size_t) b * S + s] != 0) acc += gp_load(h, (size_t) s * cols + c);
        }
        gp_store(out, (size_t) b * cols + c, acc * inv);
    }
}

// y = act(y) in place on n bf16 values (the activations cuBLASLt has no epilogue for). Grid-stride.
extern "C" __global__ void activate_bf16(__nv_bfloat16* y, long long n, int act) {
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long) gridDim.x * blockDim.x) {
        y[i] = __float2bfloat16_rn(gp_activate(__bfloat162float(y[i]), act));
    }
}

// dst[i] = (float) src[i] for n values: bf16 activations to the FP32 outputs a client receives. Grid-stride.
extern "C" __global__ void bf16_to_f32(const __nv_bfloat16* __restrict__ src, float* __restrict__ dst, long long n) {
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long) gridDim.x * blockDim.x) {
        dst[i] = __bfloat162float(src[i]);
    }
}

// dst[i] = bf16(src[i]) (nearest even) for n values: FP32 results back into bf16 activations. Grid-stride.
extern "C" __global__ void f32_to_bf16(const float* __restrict__ src, __nv_bfloat16* __restrict__ dst, long long n) {
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long) gridDim.x * blockDim.x) {
        dst[i] = __float2bfloat16_rn(src[i]);
    }
}

// add_layer_norm_bf16 for rows of at most 8·blockDim.x columns (BERT-base: 768 over 256 threads): each thread
// keeps its columns of x + residual in registers, so x and residual are read once instead of three times; the
// statistics are the same FP32 two-reduction mean and variance. y may alias x or residual. Grid (rows).
extern "C" __global__ void add_layer_norm_bf16_reg(const __nv_bfloat16* x, const __nv_bfloat16* residual,
                                                   const float* __restrict__ gamma, const float* __restrict__ beta,
                                                   __nv_bfloat16* y, int cols, float eps) {
    constexpr int PER_THREAD = 8;
    __shared__ float scratch[32];
    const size_t offset = (size_t) blockIdx.x * cols;
    float v[PER_THREAD];
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) {
        const int c = threadIdx.x + i * blockDim.x;
        v[i] = 0.0f;
        if (c < cols) {
            v[i] = gp_load(x, offset + c) + (residual == nullptr ? 0.0f : gp_load(residual, offset + c));
        }
        sum += v[i];
    }
    const float mean = gp_block_sum(sum, scratch) / cols;
    float sq = 0.0f;
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) {
        const int c = threadIdx.x + i * blockDim.x;
        const float d = c < cols ? v[i] - mean : 0.0f;
        sq += d * d;
    }
    const float inv = rsqrtf(gp_block_sum(sq, scratch) / cols + eps);
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) {
        const int c = threadIdx.x + i * blockDim.x;
        if (c < cols) gp_store(y, offset + c, (v[i] - mean) * inv * gamma[c] + beta[c]);
    }
}

// ---------------------------------------------------------------------------------------------------------------------
// Warp-per-row LayerNorm: add_layer_norm_warp{,_bf16}, embedding_layer_norm_warp{,_bf16}.
//
// A row of `cols` activations of type T is cut into 16-byte vectors of V = 16 / sizeof(T) elements (4 floats, 8 bf16);
// lane l of the row's warp holds vectors l, l + 32, l + 64, ... (chunk i = vector i·32 + l, columns i·32·V + l·V ..
// + V - 1), so each chunk is one coalesced 512-byte warp access:
//
//   row:   | chunk 0: lane 0 | lane 1 | ... | lane 31 | chunk 1: lane 0 | ... |     chunks = cols / (32·V)
//            V columns each
//
// The lane keeps its chunks in registers (at most GP_WARP_LN_MAX_CHUNKS), so x and residual are read once; mean and
// population variance are two warp sums in FP32 (the second over (v - mean)², exact two-pass, no shared memory, no
// block barrier). Each lane writes only the columns it read, so y may alias x or residual. Needs cols a multiple of
// 32·V with at most GP_WARP_LN_MAX_CHUNKS chunks (FP32: 128 .. 1024 columns, bf16: 256 .. 2048) and 16-byte aligned
// rows, tables, gamma and beta; the host picks the block kernels above otherwise. Block: any multiple of 32 threads,
// one row per warp; grid ⌈rows / warps per block⌉.
// ---------------------------------------------------------------------------------------------------------------------

#define GP_WARP_LN_MAX_CHUNKS 8

// Loads N floats (N a multiple of 4) from 16-byte aligned p.
template <int N>
static __device__ __forceinline__ void gp_load_floats(const float* p, float* v) {
#pragma unroll
    for (int k = 0; k < N / 4; ++k) {
        const float4 q = reinterpret_cast<const float4*>(p)[k];
        v[4 * k] = q.x;
        v[4 * k + 1] = q.y;
        v[4 * k + 2] = q.z;
        v[4 * k + 3] = q.w;
    }
}

// One 16-byte vector of activations, widened to FP32.
static __device__ __forceinline__ void gp_load_vector(const float* p, float* v) { gp_load_floats<4>(p, v); }

static __device__ __forceinline__ void gp_load_vector(const __nv_bfloat16* p, float* v) {
    const uint4 q = *reinterpret_cast<const uint4*>(p);
    const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&q);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const float2 f = __bfloat1622float2(pairs[k]);
        v[2 * k] = f.x;
        v[2 * k + 1] = f.y;
    }
}

// Stores one 16-byte vector (bf16: rounded to nearest even).
static __device__ __forceinline__ void gp_store_vector(float* p, const float* v) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}

static __device__ __forceinline__ void gp_store_vector(__nv_bfloat16* p, const float* v) {
    uint4 q;
    __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&q);
#pragma unroll
    for (int k = 0; k < 4; ++k) pairs[k] = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
    *reinterpret_cast<uint4*>(p) = q;
}

// The row's warp normalises it: y[c] = (v(c) - mean) · rstd · gamma[c] + beta[c]; `load(c, out)` writes the V
// pre-norm values of columns c .. c + V - 1 into out. y points at the row.
template <typename T, typename Load>
__device__ __forceinline__ void gp_warp_layer_norm(Load load, const float* __restrict__ gamma,
                                                   const float* __restrict__ beta, T* y, int cols, float eps) {
    constexpr int V = 16 / sizeof(T);
    const int lane = threadIdx.x & 31;
    const int chunks = cols / (32 * V);
    float v[GP_WARP_LN_MAX_CHUNKS][V];
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < GP_WARP_LN_MAX_CHUNKS; ++i) {
        if (i < chunks) {
            load((i * 32 + lane) * V, v[i]);
#pragma unroll
            for (int j = 0; j < V; ++j) sum += v[i][j];
        }
    }
    const float mean = gp_warp_sum(sum) / cols;
    float sq = 0.0f;
#pragma unroll
    for (int i = 0; i < GP_WARP_LN_MAX_CHUNKS; ++i) {
        if (i < chunks) {
#pragma unroll
            for (int j = 0; j < V; ++j) {
                const float d = v[i][j] - mean;
                sq += d * d;
            }
        }
    }
    const float rstd = rsqrtf(gp_warp_sum(sq) / cols + eps);
#pragma unroll
    for (int i = 0; i < GP_WARP_LN_MAX_CHUNKS; ++i) {
        if (i < chunks) {
            const int c = (i * 32 + lane) * V;
            float g[V];
            float b[V];
            gp_load_floats<V>(gamma + c, g);
            gp_load_floats<V>(beta + c, b);
#pragma unroll
            for (int j = 0; j < V; ++j) v[i][j] = (v[i][j] - mean) * rstd * g[j] + b[j];
            gp_store_vector(y + c, v[i]);
        }
    }
}

// Vectors of x + residual (residual may be null) at a row.
template <typename T>
struct GpResidualVectors {
    const T* x;
    const T* residual;
    __device__ __forceinline__ void operator()(int c, float* v) const {
        constexpr int V = 16 / sizeof(T);
        gp_load_vector(x + c, v);
        if (residual != nullptr) {
            float r[V];
            gp_load_vector(residual + c, r);
#pragma unroll
            for (int j = 0; j < V; ++j) v[j] += r[j];
        }
    }
};

// Vectors of word + position + tokenType at a token's table rows (FP32 tables; V floats per vector).
template <int V>
struct GpEmbeddingVectors {
    const float* w;
    const float* p;
    const float* t;
    __device__ __forceinline__ void operator()(int c, float* v) const {
        float a[V];
        float b[V];
        gp_load_floats<V>(w + c, v);
        gp_load_floats<V>(p + c, a);
        gp_load_floats<V>(t + c, b);
#pragma unroll
        for (int j = 0; j < V; ++j) v[j] = (v[j] + a[j] + b[j]) + 0.0f;
    }
};

template <typename T>
__device__ __forceinline__ void gp_add_layer_norm_warp(const T* x, const T* residual, const float* __restrict__ gamma,
                                                       const float* __restrict__ beta, T* y, int rows, int cols,
                                                       float eps) {
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;
    const size_t offset = (size_t) row * cols;
    const GpResidualVectors<T> load{x + offset, residual == nullptr ? nullptr : residual + offset};
    gp_warp_layer_norm(load, gamma, beta, y + offset, cols, eps);
}

template <typename T>
__device__ __forceinline__ void gp_embedding_layer_norm_warp(const int* __restrict__ ids,
                                                             const int* __restrict__ types,
                                                             const float* __restrict__ word,
                                                             const float* __restrict__ position,
                                                             const float* __restrict__ tokenType,
                                                             const float* __restrict__ gamma,
                                                             const float* __restrict__ beta, T* __restrict__ out,
                                                             int tokens, int S, int hidden, float eps) {
    const int token = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (token >= tokens) return;
    const GpEmbeddingVectors<16 / sizeof(T)> load{word + (size_t) ids[token] * hidden,
                                                  position + (size_t) (token % S) * hidden,
                                                  tokenType + (size_t) (types == nullptr ? 0 : types[token]) * hidden};
    gp_warp_layer_norm(load, gamma, beta, out + (size_t) token * hidden, hidden, eps);
}

// y = LayerNorm(x + residual) · gamma + beta, one warp per row (see above); residual may be null, y may alias x or
// residual. Grid ⌈rows / (blockDim.x / 32)⌉.
extern "C" __global__ void add_layer_norm_warp(const float* x, const float* residual, const float* __restrict__ gamma,
                                               const float* __restrict__ beta, float* y, int rows, int cols,
                                               float eps) {
    gp_add_layer_norm_warp(x, residual, gamma, beta, y, rows, cols, eps);
}

extern "C" __global__ void add_layer_norm_warp_bf16(const __nv_bfloat16* x, const __nv_bfloat16* residual,
                                                    const float* __restrict__ gamma, const float* __restrict__ beta,
                                                    __nv_bfloat16* y, int rows, int cols, float eps) {
    gp_add_layer_norm_warp(x, residual, gamma, beta, y, rows, cols, eps);
}

// embedding_layer_norm, one warp per token (see above). Grid ⌈tokens / (blockDim.x / 32)⌉.
extern "C" __global__ void embedding_layer_norm_warp(const int* __restrict__ ids, const int* __restrict__ types,
                                                     const float* __restrict__ word,
                                                     const float* __restrict__ position,
                                                     const float* __restrict__ tokenType,
                                                     const float* __restrict__ gamma, const float* __restrict__ beta,
                                                     float* __restrict__ out, int tokens, int S, int hidden,
                                                     float eps) {
    gp_embedding_layer_norm_warp(ids, types, word, position, tokenType, gamma, beta, out, tokens, S, hidden, eps);
}

extern "C" __global__ void embedding_layer_norm_warp_bf16(const int* __restrict__ ids, const int* __restrict__ types,
                                                          const float* __restrict__ word,
                                                          const float* __restrict__ position,
                                                          const float* __restrict__ tokenType,
                                                          const float* __restrict__ gamma,
                                                          const float* __restrict__ beta,
                                                          __nv_bfloat16* __restrict__ out, int tokens, int S,
                                                          int hidden, float eps) {
    gp_embedding_layer_norm_warp(ids, types, word, position, tokenType, gamma, beta, out, tokens, S, hidden, eps);
}
