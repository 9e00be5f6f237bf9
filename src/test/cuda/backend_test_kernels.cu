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

// Writes its ten scalar arguments, each widened to 8 bytes (floats as their bit pattern), to out[0..10) when
// out is not null; with out null it does nothing, which makes it the trivial kernel of the launch benchmark.
// Eleven parameters of mixed size check that every argument reaches its own slot.
extern "C" __global__ void echo_arguments(long long* out, long long a, int b, float c, long long d, int e,
                                          float f, long long g, int h, float i, int j) {
    if (out != nullptr && blockIdx.x == 0 && threadIdx.x == 0) {
        out[0] = a;
        out[1] = b;
        out[2] = __float_as_int(c);
        out[3] = d;
        out[4] = e;
        out[5] = __float_as_int(f);
        out[6] = g;
        out[7] = h;
        out[8] = __float_as_int(i);
        out[9] = j;
    }
}

// No parameters, no work: the launch benchmark's floor.
extern "C" __global__ void noop() {
}
