// Helpers shared by the gpupool kernels. Header-only, device-side, no state.
//
// House rule for these sources: a device function that declares __shared__ memory must not be `static`
// (nvcc would name the array after a hash of the file's absolute path and the committed PTX would depend on
// where the repository is checked out; tools/check-ptx.sh would then fail on every other machine).
#ifndef GPUPOOL_COMMON_CUH
#define GPUPOOL_COMMON_CUH

#include <cuda_bf16.h>

// Element access for kernels that run on FP32 or bf16 activations; arithmetic is always FP32.
static __device__ __forceinline__ float gp_load(const float* p, size_t i) { return p[i]; }
static __device__ __forceinline__ float gp_load(const __nv_bfloat16* p, size_t i) { return __bfloat162float(p[i]); }
static __device__ __forceinline__ void gp_store(float* p, size_t i, float v) { p[i] = v; }
static __device__ __forceinline__ void gp_store(__nv_bfloat16* p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }

// Activation codes: the ordinal of io.gpupool.kernels.TensorOps.Activation.
#define ACT_NONE 0
#define ACT_GELU 1
#define ACT_RELU 2
#define ACT_TANH 3

// Applies an activation; GELU is the erf form ("gelu" in HuggingFace).
static __device__ __forceinline__ float gp_activate(float v, int act) {
    switch (act) {
        case ACT_GELU: return 0.5f * v * (1.0f + erff(v * 0.7071067811865475f));
        case ACT_RELU: return fmaxf(v, 0.0f);
        case ACT_TANH: return tanhf(v);
        default: return v;
    }
}

static __device__ __forceinline__ float gp_warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    }
    return v;
}

static __device__ __forceinline__ float gp_warp_max(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    }
    return v;
}

// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024); every thread gets the result.
// `scratch` holds 32 floats; the call ends with the scratch free for reuse.
static __device__ __forceinline__ float gp_block_sum(float v, float* scratch) {
    int lane = threadIdx.x & 31;
    int warp = threadIdx.x >> 5;
    int warps = blockDim.x >> 5;
    v = gp_warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float total = lane < warps ? scratch[lane] : 0.0f;
    total = gp_warp_sum(total);
    __syncthreads();
    return total;
}

static __device__ __forceinline__ float gp_block_max(float v, float* scratch) {
    int lane = threadIdx.x & 31;
    int warp = threadIdx.x >> 5;
    int warps = blockDim.x >> 5;
    v = gp_warp_max(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float best = lane < warps ? scratch[lane] : -3.402823466e38f;
    best = gp_warp_max(best);
    __syncthreads();
    return best;
}

// LayerNorm of one row by a whole block: out[offset + c] = (v(c) - mean) / sqrt(var + eps) · gamma[c] + beta[c] for
// c < cols, where v(c) is the row's pre-norm value at column c (a sum the caller forms; it is formed again in each of
// the three passes instead of stored). FP32 mean and population variance (as torch), two block reductions. Thread t
// handles columns t, t + blockDim.x, ..., so a thread writes only what it read and out may alias v's inputs.
// `scratch` is the caller's 32-float shared array (a device function here must not declare __shared__ itself, see
// the house rule above).
template <typename Out, typename Value>
__device__ __forceinline__ void gp_block_layer_norm(Value v, const float* __restrict__ gamma,
                                                    const float* __restrict__ beta, Out* out, size_t offset, int cols,
                                                    float eps, float* scratch) {
    float sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += v(c);
    const float mean = gp_block_sum(sum, scratch) / cols;
    float sq = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float d = v(c) - mean;
        sq += d * d;
    }
    const float inv = rsqrtf(gp_block_sum(sq, scratch) / cols + eps);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) gp_store(out, offset + c, (v(c) - mean) * inv * gamma[c] + beta[c]);
}

// The pre-norm value of an embeddings row: word[id] + position[row] + tokenType[type]. The trailing + 0.0f makes the
// FP32 sum bit-identical to embedding_sum followed by add_layer_norm without a residual (x + 0).
struct GpEmbeddingRow {
    const float* w;
    const float* p;
    const float* t;
    __device__ __forceinline__ float operator()(int c) const { return (w[c] + p[c] + t[c]) + 0.0f; }
};

// One block per token t = blockIdx.x: out[t, :] = LayerNorm(word[ids[t]] + position[positionRow(t)] +
// tokenType[types[t]]) · gamma + beta (types may be null: type 0), stored once in Out's type. positionRow: t mod S for
// padded rows (ops.cu), positions[t] for packed ones (packed.cu).
template <typename Out, typename PositionRow>
__device__ __forceinline__ void gp_embedding_layer_norm(const int* __restrict__ ids, const int* __restrict__ types,
                                                        const float* __restrict__ word,
                                                        const float* __restrict__ position,
                                                        const float* __restrict__ tokenType,
                                                        const float* __restrict__ gamma,
                                                        const float* __restrict__ beta, Out* __restrict__ out,
                                                        int hidden, float eps, PositionRow positionRow, float* scratch) {
    const int token = blockIdx.x;
    const GpEmbeddingRow row{word + (size_t) ids[token] * hidden, position + (size_t) positionRow(token) * hidden,
                             tokenType + (size_t) (types == nullptr ? 0 : types[token]) * hidden};
    gp_block_layer_norm(row, gamma, beta, out, (size_t) token * hidden, hidden, eps, scratch);
}

#endif
