// Row-wise and gather kernels of the encoder: embeddings, residual + LayerNorm, pooling, softmax.
//
// Each kernel gives one block to one output row and lets the block's threads stride over the columns
// (column c is handled by thread c mod blockDim.x), so a row is read with coalesced accesses and reduced
// with gp_block_sum / gp_block_max. A thread only ever writes the columns it read itself, which is why the
// in-place variants (y == x) are safe. Block size: 256 threads (any multiple of 32 up to 1024 works).

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

// y = LayerNorm(x + residual) · gamma + beta, per row, population variance (as torch). Grid (rows).
// residual may be null; y may alias x or residual.
extern "C" __global__ void add_layer_norm(const float* x, const float* residual, const float* __restrict__ gamma,
                                          const float* __restrict__ beta, float* y, int cols, float eps) {
    __shared__ float scratch[32];
    const size_t offset = (size_t) blockIdx.x * cols;
    const float* xr = x + offset;
    const float* rr = residual == nullptr ? nullptr : residual + offset;

    float sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        sum += xr[c] + (rr == nullptr ? 0.0f : rr[c]);
    }
    const float mean = gp_block_sum(sum, scratch) / cols;

    float sq = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float v = xr[c] + (rr == nullptr ? 0.0f : rr[c]) - mean;
        sq += v * v;
    }
    const float inv = rsqrtf(gp_block_sum(sq, scratch) / cols + eps);

    float* yr = y + offset;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float v = xr[c] + (rr == nullptr ? 0.0f : rr[c]) - mean;
        yr[c] = v * inv * gamma[c] + beta[c];
    }
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
    gp_embedding_layer_norm(ids, types, word, position, tokenType, gamma, beta, out, hidden, eps, GpColumnPosition{S});
}

extern "C" __global__ void embedding_layer_norm_bf16(const int* __restrict__ ids, const int* __restrict__ types,
                                                     const float* __restrict__ word,
                                                     const float* __restrict__ position,
                                                     const float* __restrict__ tokenType,
                                                     const float* __restrict__ gamma, const float* __restrict__ beta,
                                                     __nv_bfloat16* __restrict__ out, int S, int hidden, float eps) {
    gp_embedding_layer_norm(ids, types, word, position, tokenType, gamma, beta, out, hidden, eps, GpColumnPosition{S});
}

// add_layer_norm on bf16 x, residual (may be null) and y (may alias either); gamma, beta FP32. Grid (rows).
extern "C" __global__ void add_layer_norm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* residual,
                                               const float* __restrict__ gamma, const float* __restrict__ beta,
                                               __nv_bfloat16* y, int cols, float eps) {
    __shared__ float scratch[32];
    const size_t offset = (size_t) blockIdx.x * cols;
    float sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        sum += gp_load(x, offset + c) + (residual == nullptr ? 0.0f : gp_load(residual, offset + c));
    }
    const float mean = gp_block_sum(sum, scratch) / cols;
    float sq = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float v = gp_load(x, offset + c) + (residual == nullptr ? 0.0f : gp_load(residual, offset + c)) - mean;
        sq += v * v;
    }
    const float inv = rsqrtf(gp_block_sum(sq, scratch) / cols + eps);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float v = gp_load(x, offset + c) + (residual == nullptr ? 0.0f : gp_load(residual, offset + c)) - mean;
        gp_store(y, offset + c, v * inv * gamma[c] + beta[c]);
    }
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
