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

// One block per token t = blockIdx.x: out[t, :] = LayerNorm(word[ids[t]] + position[positionRow(t)] +
// tokenType[types[t]]) · gamma + beta (types may be null: type 0), FP32 sum, mean and variance, stored once in Out's
// type. The sum is recomputed in each of the three passes instead of stored. positionRow: t mod S for padded rows
// (ops.cu), positions[t] for packed ones (packed.cu).
template <typename Out, typename PositionRow>
__device__ __forceinline__ void gp_embedding_layer_norm(const int* __restrict__ ids, const int* __restrict__ types,
                                                        const float* __restrict__ word,
                                                        const float* __restrict__ position,
                                                        const float* __restrict__ tokenType,
                                                        const float* __restrict__ gamma,
                                                        const float* __restrict__ beta, Out* __restrict__ out,
                                                        int hidden, float eps, PositionRow positionRow) {
    __shared__ float scratch[32];
    const int token = blockIdx.x;
    const float* w = word + (size_t) ids[token] * hidden;
    const float* p = position + (size_t) positionRow(token) * hidden;
    const float* t = tokenType + (size_t) (types == nullptr ? 0 : types[token]) * hidden;
    float sum = 0.0f;
    for (int c = threadIdx.x; c < hidden; c += blockDim.x) sum += (w[c] + p[c] + t[c]) + 0.0f;
    const float mean = gp_block_sum(sum, scratch) / hidden;
    float sq = 0.0f;
    for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
        const float v = ((w[c] + p[c] + t[c]) + 0.0f) - mean;
        sq += v * v;
    }
    const float inv = rsqrtf(gp_block_sum(sq, scratch) / hidden + eps);
    const size_t offset = (size_t) token * hidden;
    for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
        const float v = ((w[c] + p[c] + t[c]) + 0.0f) - mean;
        gp_store(out, offset + c, v * inv * gamma[c] + beta[c]);
    }
}

#endif
