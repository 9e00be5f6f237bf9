// Helpers shared by the gpupool kernels. Header-only, device-side, no state.
//
// House rule for these sources: a device function that declares __shared__ memory must not be `static`
// (nvcc would name the array after a hash of the file's absolute path and the committed PTX would depend on
// where the repository is checked out; tools/check-ptx.sh would then fail on every other machine).
#ifndef GPUPOOL_COMMON_CUH
#define GPUPOOL_COMMON_CUH

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

#endif
