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
