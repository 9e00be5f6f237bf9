// Kernels used by the CUDA backend tests. Compile (from the repository root):
//   nvcc -ptx -arch=sm_90 -o src/test/resources/ptx/backend_test_kernels.ptx src/test/cuda/backend_test_kernels.cu

// x[i] = a * x[i] + b for i < n. Exercises Long (pointer, count), Float and Integer arguments.
extern "C" __global__ void axpb(float* x, long long n, float a, int b) {
    long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] = a * x[i] + (float) b;
    }
}

// Busy-waits about `cycles` clock ticks, then writes `value` to p[0..n). Keeps a stream busy so that
// tests can check that later work on another stream really waits.
extern "C" __global__ void spin_then_fill(int* p, long long n, int value, long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long) gridDim.x * blockDim.x) {
        p[i] = value;
    }
}
