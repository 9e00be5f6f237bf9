// Standalone check and benchmark of the committed gpupool PTX (src/main/resources/ptx/*.ptx).
//
// It loads the very PTX text the Java CudaTensorOps loads (through the runtime's library API, which JIT-compiles
// it for the GPU at hand), runs every kernel on fresh random inputs against a CPU reference computed in double,
// and times the GEMM kernels at 4096^3 and at BERT-base shapes, plus the fused attention.
//
// Usage: harness <ptx-dir> <out.json> [--quick | --attention | --ops]   (--attention: only the attention kernels)
//   --ops: only the LayerNorm kernels (block- and warp-per-row, FP32 and bf16): checks, timings at 16384 and 128 rows
// Output: one JSON document (checks: max abs error, relative error ||out-ref||/||ref||; gemm: median ms and
// TFLOP/s per kernel and shape) and a short table on stdout. Exit status 1 if any check fails.
//
// Build: tools/cuda-harness/build.sh (nvcc, x86-64, static cudart; needs only the driver at run time).

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#define CHECK(call)                                                                                      \
    do {                                                                                                 \
        cudaError_t err_ = (call);                                                                       \
        if (err_ != cudaSuccess) {                                                                       \
            std::fprintf(stderr, "%s:%d %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
            std::exit(2);                                                                                \
        }                                                                                                \
    } while (0)

static std::map<std::string, cudaKernel_t> kernels;
static std::vector<cudaLibrary_t> libraries;
static std::mt19937 rng(20261129);
static std::ostringstream json;
static bool firstEntry = true;
static int failures = 0;

static void loadPtx(const std::string& dir, const std::string& name, const std::vector<std::string>& functions) {
    std::ifstream in(dir + "/" + name + ".ptx", std::ios::binary);
    if (!in) {
        std::fprintf(stderr, "cannot read %s/%s.ptx\n", dir.c_str(), name.c_str());
        std::exit(2);
    }
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    cudaLibrary_t lib;
    CHECK(cudaLibraryLoadData(&lib, text.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    libraries.push_back(lib);
    for (const auto& f : functions) {
        cudaKernel_t k;
        CHECK(cudaLibraryGetKernel(&k, lib, f.c_str()));
        kernels[f] = k;
    }
}

struct Args {
    std::vector<void*> ptrs;
    std::vector<uint64_t> store;
    Args() { store.reserve(16); }
    template <typename T>
    Args& add(T v) {
        uint64_t slot = 0;
        std::memcpy(&slot, &v, sizeof(T));
        store.push_back(slot);
        return *this;
    }
    void** finish() {
        ptrs.clear();
        for (auto& s : store) ptrs.push_back(&s);
        return ptrs.data();
    }
};

static void launch(const std::string& name, dim3 grid, dim3 block, Args& args) {
    auto it = kernels.find(name);
    if (it == kernels.end()) {
        std::fprintf(stderr, "no kernel %s\n", name.c_str());
        std::exit(2);
    }
    CHECK(cudaLaunchKernel((const void*) it->second, grid, block, args.finish(), 0, 0));
    CHECK(cudaGetLastError());
}

static std::vector<float> randomVector(size_t n, float scale = 1.0f) {
    std::uniform_real_distribution<float> dist(-scale, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

template <typename T>
static T* upload(const std::vector<T>& host) {
    T* dev;
    CHECK(cudaMalloc(&dev, std::max<size_t>(host.size(), 1) * sizeof(T)));
    CHECK(cudaMemcpy(dev, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    return dev;
}

static float* poisoned(size_t n) {
    float* dev;
    CHECK(cudaMalloc(&dev, n * sizeof(float)));
    CHECK(cudaMemset(dev, 0xFF, n * sizeof(float)));   // NaN: an unwritten element fails the check
    return dev;
}

static std::vector<float> download(const float* dev, size_t n) {
    std::vector<float> host(n);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(host.data(), dev, n * sizeof(float), cudaMemcpyDeviceToHost));
    return host;
}

static void entry(const std::string& text) {
    json << (firstEntry ? "\n    " : ",\n    ") << text;
    firstEntry = false;
}

// Compares and records; tolerance on the max abs error.
static void report(const std::string& what, const std::vector<float>& got, const std::vector<double>& ref,
                   double tolerance) {
    double maxAbs = 0, diff2 = 0, ref2 = 0;
    bool nan = false;
    for (size_t i = 0; i < ref.size(); ++i) {
        if (!std::isfinite(got[i])) nan = true;
        double d = std::fabs((double) got[i] - ref[i]);
        maxAbs = std::max(maxAbs, d);
        diff2 += d * d;
        ref2 += ref[i] * ref[i];
    }
    double rel = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
    bool ok = !nan && maxAbs <= tolerance;
    if (!ok) ++failures;
    std::printf("%-44s max_abs %.3e  rel %.3e  tol %.1e  %s\n", what.c_str(), nan ? NAN : maxAbs, rel, tolerance,
                ok ? "ok" : "FAIL");
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "{\"check\": \"%s\", \"max_abs\": %.6e, \"rel\": %.6e, \"tolerance\": %.1e, \"nan\": %s, \"ok\": %s}",
                  what.c_str(), nan ? -1.0 : maxAbs, rel, tolerance, nan ? "true" : "false", ok ? "true" : "false");
    entry(buf);
}

static double activate(double v, int act) {
    switch (act) {
        case 1: return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
        case 2: return std::max(v, 0.0);
        case 3: return std::tanh(v);
        default: return v;
    }
}

static const char* ACT_NAMES[] = {"none", "gelu", "relu", "tanh"};

// ---------------------------------------------------------------------------------------------------------------------
// Split-K (the same plan as GemmKernels.splitSlices / splitChunk; keep the two in step)
// ---------------------------------------------------------------------------------------------------------------------

static const int SPLIT_K_TARGET_BLOCKS = 264, SPLIT_K_MIN_CHUNK = 128, SPLIT_K_MAX = 16;

static int splitChunk(int K, int slices) { return ((K + slices - 1) / slices + 15) / 16 * 16; }

// Slices for a product of `tiles` output tiles; 1 = not split.
static int splitSlices(long tiles, int K) {
    if (tiles >= SPLIT_K_TARGET_BLOCKS) return 1;
    long s = std::min<long>(SPLIT_K_MAX, std::min<long>(SPLIT_K_TARGET_BLOCKS / tiles, K / SPLIT_K_MIN_CHUNK));
    if (s < 2) return 1;
    int chunk = splitChunk(K, (int) s);
    return (K + chunk - 1) / chunk;
}

// A "split:<kernel>" name runs what CudaTensorOps launches for a split product: gemm_splitk_init (Y = bias),
// <kernel>_splitk over (tiles, slices), gemm_splitk_act when act != 0. slices <= 0: the CudaTensorOps plan.
static bool isSplit(const std::string& kernel) { return kernel.rfind("split:", 0) == 0; }

static int launchGemm(const std::string& kernel, float* dx, float* dw, float* db, float* dy, int M, int N, int K,
                      int act, int slices = 0) {
    bool split = isSplit(kernel);
    std::string base = split ? kernel.substr(6) : kernel;
    bool tc = base != "gemm_f32";
    int tile = base.find("_64") != std::string::npos ? 64 : 128;
    dim3 grid((N + tile - 1) / tile, (M + tile - 1) / tile);
    dim3 block(tc && tile == 64 ? 128 : 256);
    Args a;
    if (!split) {
        a.add(dx).add(dw).add(db).add(dy).add(M).add(N).add(K).add(act);
        launch(base, grid, block, a);
        return 1;
    }
    if (slices <= 0) slices = splitSlices((long) grid.x * grid.y, K);
    int chunk = splitChunk(K, std::max(slices, 1));
    grid.z = (K + chunk - 1) / chunk;
    long total = (long) M * N;
    dim3 passGrid((unsigned) std::min<long>(1024, (total + 255) / 256));
    Args init;
    init.add(db).add(dy).add(M).add(N);
    launch("gemm_splitk_init", passGrid, dim3(256), init);
    a.add(dx).add(dw).add(dy).add(M).add(N).add(K).add(chunk);
    launch(base + "_splitk", grid, block, a);
    if (act != 0) {
        Args pass;
        pass.add(dy).add(M).add(N).add(act);
        launch("gemm_splitk_act", passGrid, dim3(256), pass);
    }
    return (int) grid.z;
}

// ---------------------------------------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------------------------------------

static void checkGemm(const std::string& kernel, int M, int N, int K, int act, double tol, int slices = 0,
                      bool withBias = true) {
    auto x = randomVector((size_t) M * K), w = randomVector((size_t) N * K, 0.1f), bias = randomVector(N);
    if (!withBias) std::fill(bias.begin(), bias.end(), 0.0f);
    float *dx = upload(x), *dw = upload(w), *db = withBias ? upload(bias) : nullptr, *dy = poisoned((size_t) M * N);
    int used = launchGemm(kernel, dx, dw, db, dy, M, N, K, act, slices);
    auto got = download(dy, (size_t) M * N);
    std::vector<double> ref((size_t) M * N);
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            double s = bias[j];
            for (int k = 0; k < K; ++k) s += (double) x[(size_t) i * K + k] * w[(size_t) j * K + k];
            ref[(size_t) i * N + j] = activate(s, act);
        }
    char name[128];
    if (isSplit(kernel)) {
        std::snprintf(name, sizeof name, "%s %dx%dx%d %s s%d%s", kernel.c_str(), M, N, K, ACT_NAMES[act], used,
                      withBias ? "" : " nobias");
    } else {
        std::snprintf(name, sizeof name, "%s %dx%dx%d %s", kernel.c_str(), M, N, K, ACT_NAMES[act]);
    }
    report(name, got, ref, tol);
    cudaFree(dx); cudaFree(dw); if (db) cudaFree(db); cudaFree(dy);
}

// The FP32 kernels take (qkv, mask, ctx, S, H, D) on 32-query tiles; the BF16 and TF32 ones (qkv, mask, ctx, S, H), 64.
static void launchAttention(const std::string& kernel, Args& a, float* dq, int* dm, float* dc, int B, int S, int H,
                            int D) {
    a.store.clear();
    a.add(dq).add(dm).add(dc).add(S).add(H);
    if (kernel == "attention_bf16_d64" || kernel == "attention_tf32_d64" || kernel == "attention_d64_tiled") {
        launch(kernel, dim3((S + 63) / 64, H, B), dim3(128), a);
    } else {
        a.add(D);
        launch(kernel, dim3((S + 31) / 32, H, B), dim3(128), a);
    }
}

static std::vector<int> attentionMask(int B, int S, int kind);

// maskKind >= 0: one of attentionMask's patterns instead of the default padding (withMask must then be true).
static void checkAttention(const std::string& kernel, int B, int S, int H, int D, bool withMask,
                           double tolerance = 1e-5, int maskKind = -1) {
    const int width = 3 * H * D;
    auto qkv = randomVector((size_t) B * S * width);
    std::vector<int> mask((size_t) B * S, 1);
    if (withMask && maskKind >= 0) {
        mask = attentionMask(B, S, maskKind);
    } else if (withMask) {
        for (int b = 0; b < B; ++b) {
            int real = b == 0 ? S : std::max(1, S - 1 - b * 7 % S);   // batch 0 unpadded, others padded
            for (int s = real; s < S; ++s) mask[(size_t) b * S + s] = 0;
        }
        if (B > 2)
            for (int s = 0; s < S; ++s) mask[(size_t) 2 * S + s] = 0;   // batch 2 fully masked
    }
    float* dq = upload(qkv);
    int* dm = withMask ? upload(mask) : nullptr;
    float* dc = poisoned((size_t) B * S * H * D);
    Args a;
    launchAttention(kernel, a, dq, dm, dc, B, S, H, D);
    auto got = download(dc, (size_t) B * S * H * D);
    std::vector<double> ref((size_t) B * S * H * D);
    std::vector<double> score(S);
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < H; ++h)
            for (int i = 0; i < S; ++i) {
                const float* q = &qkv[((size_t) b * S + i) * width + h * D];
                double best = -INFINITY;
                for (int j = 0; j < S; ++j) {
                    const float* k = &qkv[((size_t) b * S + j) * width + H * D + h * D];
                    double s = 0;
                    for (int d = 0; d < D; ++d) s += (double) q[d] * k[d];
                    s /= std::sqrt((double) D);
                    if (!mask[(size_t) b * S + j]) s = -3.402823466e38;
                    score[j] = s;
                    best = std::max(best, s);
                }
                double sum = 0;
                for (int j = 0; j < S; ++j) sum += (score[j] = std::exp(score[j] - best));
                for (int d = 0; d < D; ++d) {
                    double acc = 0;
                    for (int j = 0; j < S; ++j)
                        acc += score[j] * qkv[((size_t) b * S + j) * width + 2 * H * D + h * D + d];
                    ref[((size_t) b * S + i) * H * D + h * D + d] = acc / sum;
                }
            }
    char name[128];
    if (maskKind >= 0) {
        std::snprintf(name, sizeof name, "%s B%d S%d H%d D%d mask%d", kernel.c_str(), B, S, H, D, maskKind);
    } else {
        std::snprintf(name, sizeof name, "%s B%d S%d H%d D%d %s", kernel.c_str(), B, S, H, D,
                      withMask ? "masked" : "nomask");
    }
    report(name, got, ref, tolerance);
    cudaFree(dq); cudaFree(dm); cudaFree(dc);
}

// ---- attention on bf16 activations (BF16 mode: bf16 QKV in, bf16 context out) ----

static uint16_t toBf16(float f) {   // round to nearest even, as __float2bfloat16_rn
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t) (u >> 16);
}

static float fromBf16(uint16_t h) {
    uint32_t u = (uint32_t) h << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// Kernels on bf16 qkv [B·S, 3·H·64] and bf16 ctx, (qkv, mask, ctx, S, H); queries per block and threads from the
// name (_q128: 128 queries, w8: 8 warps; else 64 queries, 4 warps).
static const char* BF16IO_KERNELS[] = {"attention_bf16io_d64", "flash_attention_bf16io_d64_q64",
                                       "flash_attention_bf16io_d64_q128", "flash_attention_bf16io_d64_q128w8"};

static int queriesPerBlock(const std::string& kernel) { return kernel.find("_q128") != std::string::npos ? 128 : 64; }

static int threadsPerBlock(const std::string& kernel) {
    return kernel.size() > 2 && kernel.compare(kernel.size() - 2, 2, "w8") == 0 ? 256 : 128;
}

static void launchAttentionBf16io(const std::string& kernel, Args& a, uint16_t* dq, int* dm, uint16_t* dc, int B,
                                  int S, int H) {
    a.store.clear();
    a.add(dq).add(dm).add(dc).add(S).add(H);
    int bm = queriesPerBlock(kernel);
    launch(kernel, dim3((S + bm - 1) / bm, H, B), dim3(threadsPerBlock(kernel)), a);
}

// Mask patterns: 0 none (null pointer); 1 batch 0 unpadded, the others right-padded, batch 2 fully masked;
// 2 random keys masked (30 %), batch 2 fully masked; 3 left-padded (the first keys masked, a whole first tile
// at S > 64); 4 only the first min(S, 10) keys real (the tiles after the first are padding only).
static std::vector<int> attentionMask(int B, int S, int kind) {
    std::vector<int> mask((size_t) B * S, 1);
    for (int b = 0; b < B; ++b)
        for (int s = 0; s < S; ++s) {
            int& v = mask[(size_t) b * S + s];
            switch (kind) {
                case 1: v = b == 0 || s < std::max(1, S - 1 - b * 7 % S); break;
                case 2: v = rng() % 10 >= 3; break;
                case 3: v = s >= std::min(S - 1, 70 + b); break;
                case 4: v = s < 10; break;
                default: break;
            }
        }
    if ((kind == 1 || kind == 2) && B > 2)
        for (int s = 0; s < S; ++s) mask[(size_t) 2 * S + s] = 0;
    return mask;
}

// One random problem, its double reference (from the bf16-rounded inputs) and every bf16-I/O kernel against it,
// plus each kernel against the first (the kernel it would replace). qkScale widens the scores (peaked softmax).
static void checkAttentionBf16io(int B, int S, int H, int maskKind, float qkScale, double tolerance = 1e-2) {
    const int D = 64, width = 3 * H * D;
    std::vector<float> qkv = randomVector((size_t) B * S * width);
    std::vector<uint16_t> packed(qkv.size());
    for (size_t i = 0; i < qkv.size(); ++i) {
        bool qk = (int) (i % width) < 2 * H * D;
        packed[i] = toBf16(qk ? qkv[i] * qkScale : qkv[i]);
        qkv[i] = fromBf16(packed[i]);
    }
    std::vector<int> mask = attentionMask(B, S, maskKind);
    std::vector<double> ref((size_t) B * S * H * D), score(S);
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < H; ++h)
            for (int i = 0; i < S; ++i) {
                const float* q = &qkv[((size_t) b * S + i) * width + h * D];
                double best = -INFINITY;
                for (int j = 0; j < S; ++j) {
                    const float* k = &qkv[((size_t) b * S + j) * width + H * D + h * D];
                    double s = 0;
                    for (int d = 0; d < D; ++d) s += (double) q[d] * k[d];
                    s /= 8.0;
                    if (!mask[(size_t) b * S + j]) s = -3.402823466e38;
                    score[j] = s;
                    best = std::max(best, s);
                }
                double sum = 0;
                for (int j = 0; j < S; ++j) sum += (score[j] = std::exp(score[j] - best));
                double* out = &ref[((size_t) b * S + i) * H * D + h * D];
                for (int d = 0; d < D; ++d) out[d] = 0;
                for (int j = 0; j < S; ++j) {
                    const float* v = &qkv[((size_t) b * S + j) * width + 2 * H * D + h * D];
                    for (int d = 0; d < D; ++d) out[d] += score[j] * v[d];
                }
                for (int d = 0; d < D; ++d) out[d] /= sum;
            }
    uint16_t* dq = upload(packed);
    int* dm = maskKind == 0 ? nullptr : upload(mask);
    const size_t n = (size_t) B * S * H * D;
    uint16_t* dc;
    CHECK(cudaMalloc(&dc, n * sizeof(uint16_t)));
    std::vector<double> first;
    for (const char* kernel : BF16IO_KERNELS) {
        CHECK(cudaMemset(dc, 0xFF, n * sizeof(uint16_t)));   // NaN
        Args a;
        launchAttentionBf16io(kernel, a, dq, dm, dc, B, S, H);
        std::vector<uint16_t> raw(n);
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaMemcpy(raw.data(), dc, n * sizeof(uint16_t), cudaMemcpyDeviceToHost));
        std::vector<float> got(n);
        for (size_t i = 0; i < n; ++i) got[i] = fromBf16(raw[i]);
        char name[160];
        std::snprintf(name, sizeof name, "%s B%d S%d H%d mask%d x%g", kernel, B, S, H, maskKind, qkScale);
        report(name, got, ref, tolerance);
        if (first.empty()) {
            first.assign(got.begin(), got.end());
        } else {
            std::snprintf(name, sizeof name, "%s B%d S%d H%d mask%d x%g vs-old", kernel, B, S, H, maskKind, qkScale);
            report(name, got, first, tolerance);
        }
    }
    cudaFree(dq); cudaFree(dm); cudaFree(dc);
}

static void checkLayerNorm(int rows, int cols, bool withResidual) {
    auto x = randomVector((size_t) rows * cols, 3.0f), r = randomVector((size_t) rows * cols);
    auto gamma = randomVector(cols), beta = randomVector(cols);
    float *dx = upload(x), *dr = withResidual ? upload(r) : nullptr, *dg = upload(gamma), *db = upload(beta);
    float* dy = poisoned((size_t) rows * cols);
    float eps = 1e-12f;
    Args a;
    a.add(dx).add(dr).add(dg).add(db).add(dy).add(cols).add(eps);
    launch("add_layer_norm", dim3(rows), dim3(256), a);
    auto got = download(dy, (size_t) rows * cols);
    std::vector<double> ref((size_t) rows * cols);
    for (int i = 0; i < rows; ++i) {
        double mean = 0, var = 0;
        for (int c = 0; c < cols; ++c) mean += x[(size_t) i * cols + c] + (withResidual ? r[(size_t) i * cols + c] : 0);
        mean /= cols;
        for (int c = 0; c < cols; ++c) {
            double v = x[(size_t) i * cols + c] + (withResidual ? r[(size_t) i * cols + c] : 0) - mean;
            var += v * v;
        }
        var /= cols;
        for (int c = 0; c < cols; ++c) {
            double v = x[(size_t) i * cols + c] + (withResidual ? r[(size_t) i * cols + c] : 0) - mean;
            ref[(size_t) i * cols + c] = v / std::sqrt(var + eps) * gamma[c] + beta[c];
        }
    }
    char name[128];
    std::snprintf(name, sizeof name, "add_layer_norm %dx%d %s", rows, cols, withResidual ? "residual" : "plain");
    report(name, got, ref, 1e-5);
    cudaFree(dx); cudaFree(dr); cudaFree(dg); cudaFree(db); cudaFree(dy);
}

static void checkEmbeddingAndPooling() {
    const int B = 3, S = 17, hidden = 96, vocab = 50, types = 2, positions = 40;
    auto word = randomVector((size_t) vocab * hidden), pos = randomVector((size_t) positions * hidden),
         typ = randomVector((size_t) types * hidden);
    std::vector<int> ids(B * S), tt(B * S), mask(B * S, 1);
    for (int i = 0; i < B * S; ++i) {
        ids[i] = rng() % vocab;
        tt[i] = rng() % types;
    }
    for (int s = 9; s < S; ++s) mask[S + s] = 0;
    float *dw = upload(word), *dp = upload(pos), *dt = upload(typ);
    int *di = upload(ids), *dtt = upload(tt), *dm = upload(mask);
    float* dout = poisoned((size_t) B * S * hidden);
    for (int withTypes = 0; withTypes < 2; ++withTypes) {
        Args a;
        a.add(di).add(withTypes ? dtt : nullptr).add(dw).add(dp).add(dt).add(dout).add(S).add(hidden);
        launch("embedding_sum", dim3(B * S), dim3(256), a);
        auto got = download(dout, (size_t) B * S * hidden);
        std::vector<double> ref((size_t) B * S * hidden);
        for (int t = 0; t < B * S; ++t)
            for (int c = 0; c < hidden; ++c)
                ref[(size_t) t * hidden + c] = (double) word[(size_t) ids[t] * hidden + c] +
                                               pos[(size_t) (t % S) * hidden + c] +
                                               typ[(size_t) (withTypes ? tt[t] : 0) * hidden + c];
        report(withTypes ? "embedding_sum types" : "embedding_sum no-types", got, ref, 1e-6);
    }
    auto hiddenStates = download(dout, (size_t) B * S * hidden);
    float* pooled = poisoned((size_t) B * hidden);
    {
        Args a;
        a.add(dout).add(pooled).add(S).add(hidden);
        launch("pool_cls", dim3(B), dim3(256), a);
        auto got = download(pooled, (size_t) B * hidden);
        std::vector<double> ref((size_t) B * hidden);
        for (int b = 0; b < B; ++b)
            for (int c = 0; c < hidden; ++c) ref[(size_t) b * hidden + c] = hiddenStates[(size_t) b * S * hidden + c];
        report("pool_cls", got, ref, 0);
    }
    for (int withMask = 0; withMask < 2; ++withMask) {
        Args a;
        a.add(dout).add(withMask ? dm : nullptr).add(pooled).add(S).add(hidden);
        launch("pool_mean", dim3(B), dim3(256), a);
        auto got = download(pooled, (size_t) B * hidden);
        std::vector<double> ref((size_t) B * hidden);
        for (int b = 0; b < B; ++b)
            for (int c = 0; c < hidden; ++c) {
                double acc = 0, n = 0;
                for (int s = 0; s < S; ++s)
                    if (!withMask || mask[b * S + s]) {
                        acc += hiddenStates[((size_t) b * S + s) * hidden + c];
                        n += 1;
                    }
                ref[(size_t) b * hidden + c] = acc / n;
            }
        report(withMask ? "pool_mean masked" : "pool_mean", got, ref, 1e-5);
    }
    cudaFree(dw); cudaFree(dp); cudaFree(dt); cudaFree(di); cudaFree(dtt); cudaFree(dm); cudaFree(dout);
    cudaFree(pooled);
}

static void checkSoftmax(int rows, int cols, bool inPlace) {
    auto x = randomVector((size_t) rows * cols, 8.0f);
    float* dx = upload(x);
    float* dy = inPlace ? dx : poisoned((size_t) rows * cols);
    Args a;
    a.add(dx).add(dy).add(cols);
    launch("softmax_rows", dim3(rows), dim3(256), a);
    auto got = download(dy, (size_t) rows * cols);
    std::vector<double> ref((size_t) rows * cols);
    for (int i = 0; i < rows; ++i) {
        double best = -INFINITY, sum = 0;
        for (int c = 0; c < cols; ++c) best = std::max(best, (double) x[(size_t) i * cols + c]);
        for (int c = 0; c < cols; ++c) sum += std::exp(x[(size_t) i * cols + c] - best);
        for (int c = 0; c < cols; ++c) ref[(size_t) i * cols + c] = std::exp(x[(size_t) i * cols + c] - best) / sum;
    }
    char name[64];
    std::snprintf(name, sizeof name, "softmax_rows %dx%d%s", rows, cols, inPlace ? " in-place" : "");
    report(name, got, ref, 1e-6);
    cudaFree(dx);
    if (!inPlace) cudaFree(dy);
}

// ---------------------------------------------------------------------------------------------------------------------
// Timing
// ---------------------------------------------------------------------------------------------------------------------

template <typename F>
static double medianMs(F body, int reps) {
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    for (int i = 0; i < 3; ++i) body();
    CHECK(cudaDeviceSynchronize());
    std::vector<float> times;
    for (int i = 0; i < reps; ++i) {
        CHECK(cudaEventRecord(start));
        body();
        CHECK(cudaEventRecord(stop));
        CHECK(cudaEventSynchronize(stop));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, start, stop));
        times.push_back(ms);
    }
    std::sort(times.begin(), times.end());
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return times[times.size() / 2];
}

static void timeGemm(const std::string& label, const std::string& kernel, int M, int N, int K, int reps) {
    std::vector<float> x = randomVector((size_t) M * K), w = randomVector((size_t) N * K, 0.05f),
                       bias = randomVector(N);
    float *dx = upload(x), *dw = upload(w), *db = upload(bias), *dy = poisoned((size_t) M * N);
    int act = 0;
    double ms = medianMs([&] { launchGemm(kernel, dx, dw, db, dy, M, N, K, act); }, reps);
    double tflops = 2.0 * M * N * K / (ms * 1e-3) / 1e12;
    std::printf("%-10s %-26s M=%-6d N=%-5d K=%-5d %9.4f ms %8.1f TFLOP/s\n", label.c_str(), kernel.c_str(), M, N, K,
                ms, tflops);
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "{\"bench\": \"gemm\", \"label\": \"%s\", \"kernel\": \"%s\", \"M\": %d, \"N\": %d, \"K\": %d, "
                  "\"ms\": %.5f, \"tflops\": %.2f}",
                  label.c_str(), kernel.c_str(), M, N, K, ms, tflops);
    entry(buf);
    cudaFree(dx); cudaFree(dw); cudaFree(db); cudaFree(dy);
}

static void timeAttention(const std::string& kernel, int B, int S, int H, int D, int reps) {
    auto qkv = randomVector((size_t) B * S * 3 * H * D);
    float* dq = upload(qkv);
    float* dc = poisoned((size_t) B * S * H * D);
    int* dm = nullptr;
    Args a;
    double ms = medianMs([&] { launchAttention(kernel, a, dq, dm, dc, B, S, H, D); }, reps);
    double tflops = 4.0 * B * H * (double) S * S * D / (ms * 1e-3) / 1e12;
    std::printf("attention  %-18s B=%-3d S=%-4d H=%-3d D=%-3d %9.4f ms %8.1f TFLOP/s\n", kernel.c_str(), B, S, H, D, ms,
                tflops);
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "{\"bench\": \"attention\", \"kernel\": \"%s\", \"B\": %d, \"S\": %d, \"H\": %d, \"D\": %d, "
                  "\"ms\": %.5f, \"tflops\": %.2f}",
                  kernel.c_str(), B, S, H, D, ms, tflops);
    entry(buf);
    cudaFree(dq); cudaFree(dc);
}

// maskKind 0: no mask; 5: every sequence's second half is padding (a bucketed batch of half-length requests).
static void timeAttentionBf16io(const std::string& kernel, int B, int S, int H, int maskKind, int reps) {
    const int D = 64;
    std::vector<float> qkv = randomVector((size_t) B * S * 3 * H * D);
    std::vector<uint16_t> packed(qkv.size());
    for (size_t i = 0; i < qkv.size(); ++i) packed[i] = toBf16(qkv[i]);
    uint16_t* dq = upload(packed);
    std::vector<int> mask((size_t) B * S, 1);
    for (int b = 0; b < B; ++b)
        for (int s = S / 2; s < S && maskKind == 5; ++s) mask[(size_t) b * S + s] = 0;
    int* dm = maskKind == 0 ? nullptr : upload(mask);
    uint16_t* dc;
    CHECK(cudaMalloc(&dc, (size_t) B * S * H * D * sizeof(uint16_t)));
    Args a;
    double ms = medianMs([&] { launchAttentionBf16io(kernel, a, dq, dm, dc, B, S, H); }, reps);
    double tflops = 4.0 * B * H * (double) S * S * D / (ms * 1e-3) / 1e12;
    std::printf("attention  %-32s B=%-3d S=%-4d H=%-3d mask%d %9.4f ms %8.1f TFLOP/s\n", kernel.c_str(), B, S, H,
                maskKind, ms, tflops);
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "{\"bench\": \"attention\", \"kernel\": \"%s\", \"io\": \"bf16\", \"B\": %d, \"S\": %d, \"H\": %d, "
                  "\"D\": %d, \"mask\": %d, \"ms\": %.5f, \"tflops\": %.2f}",
                  kernel.c_str(), B, S, H, D, maskKind, ms, tflops);
    entry(buf);
    cudaFree(dq); cudaFree(dm); cudaFree(dc);
}

// The register-tiled FP32 kernel and the bf16-I/O attention kernels: checks over S = 1..130 and longer sequences around the tile edges, every mask
// pattern, batch > 1, peaked scores; then timings at the BERT shapes.
static void attentionBf16ioSuite(int reps) {
    for (int S = 1; S <= 130; ++S) checkAttentionBf16io(3, S, 1, S % 5, S % 3 == 0 ? 4.0f : 1.0f);
    for (int S : {191, 192, 193, 255, 256, 257, 300, 383, 384, 385, 448, 500, 511, 512})
        for (int maskKind : {1, 2, 3, 4}) checkAttentionBf16io(3, S, 2, maskKind, maskKind == 2 ? 4.0f : 1.0f);
    checkAttentionBf16io(2, 512, 12, 0, 1.0f);
    checkAttentionBf16io(5, 384, 3, 1, 4.0f);
    // FP32 register-tiled kernel (exact: FP32 tolerance)
    for (int S : {1, 2, 5, 16, 31, 32, 33, 63, 64, 65, 77, 100, 127, 128, 129, 200, 255, 256, 257, 383, 512})
        checkAttention("attention_d64_tiled", 3, S, 2, 64, true, 1e-5, S % 5);
    checkAttention("attention_d64_tiled", 2, 384, 12, 64, false);
    const int shapes[][2] = {{1, 16}, {1, 128}, {8, 128}, {32, 128}, {1, 512}, {8, 512}, {32, 512}};
    for (auto& bs : shapes) {
        timeAttention("attention_d64", bs[0], bs[1], 12, 64, reps);
        timeAttention("attention_d64_tiled", bs[0], bs[1], 12, 64, reps);
        timeAttention("attention_bf16_d64", bs[0], bs[1], 12, 64, reps);   // FP32 I/O, for reference
        for (const char* k : BF16IO_KERNELS) timeAttentionBf16io(k, bs[0], bs[1], 12, 0, reps);
    }
    for (auto& bs : shapes)
        if (bs[1] == 512)
            for (const char* k : BF16IO_KERNELS) timeAttentionBf16io(k, bs[0], bs[1], 12, 5, reps);
}

// Closes the JSON document, writes it to path; the exit status: 1 if any check failed.
static int writeResults(const char* path) {
    json << "\n  ],\n  \"failures\": " << failures << "\n}\n";
    std::ofstream out(path);
    out << json.str();
    std::printf("checks failed: %d\n", failures);
    return failures == 0 ? 0 : 1;
}

#include "layernorm.cuh"   // --ops

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s <ptx-dir> <out.json> [--quick | --attention | --ops]\n", argv[0]);
        return 2;
    }
    std::setvbuf(stdout, nullptr, _IOLBF, 0);   // a run cut short by a timeout keeps every line printed so far
    bool quick = argc > 3 && std::string(argv[3]) == "--quick";
    bool attentionOnly = argc > 3 && std::string(argv[3]) == "--attention";
    bool opsOnly = argc > 3 && std::string(argv[3]) == "--ops";
    CHECK(cudaFree(nullptr));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs, cc %d.%d\n", prop.name, prop.multiProcessorCount, prop.major, prop.minor);
    if (opsOnly) {
        json << "{\n  \"device\": \"" << prop.name << "\",\n  \"mode\": \"ops\",\n  \"entries\": [";
        return runOps(argv[1], argv[2], 20);
    }

    loadPtx(argv[1], "gemm", {"gemm_f32", "gemm_tc_tf32_128", "gemm_tc_tf32_64", "gemm_tc_bf16_128", "gemm_tc_bf16_64",
                              "gemm_tc_tf32x3_128", "gemm_tc_tf32x3_64", "gemm_splitk_init", "gemm_splitk_act",
                              "gemm_f32_splitk", "gemm_tc_tf32_64_splitk", "gemm_tc_tf32x3_64_splitk",
                              "gemm_tc_bf16_64_splitk"});
    loadPtx(argv[1], "attention", {"attention_d32", "attention_d64", "attention_d128", "attention_bf16_d64",
                                   "attention_tf32_d64", "attention_bf16io_d64", "flash_attention_bf16io_d64_q64",
                                   "flash_attention_bf16io_d64_q128", "flash_attention_bf16io_d64_q128w8",
                                   "attention_d64_tiled"});
    loadPtx(argv[1], "ops", {"embedding_sum", "add_layer_norm", "pool_cls", "pool_mean", "softmax_rows"});

    json << "{\n  \"device\": \"" << prop.name << "\",\n  \"entries\": [";
    if (attentionOnly) {
        attentionBf16ioSuite(50);
        return writeResults(argv[2]);
    }

    // Correctness. Tolerances: FP32 near rounding; TF32 / BF16 by their mantissa (|x|<1, |w|<0.1, K≈260).
    for (int act = 0; act < 4; ++act) {
        checkGemm("gemm_f32", 200, 300, 260, act, 1e-5);
    }
    checkGemm("gemm_f32", 131, 301, 257, 1, 1e-5);   // odd K and N: scalar paths
    checkGemm("gemm_f32", 1, 7, 3, 0, 1e-5);
    for (const char* k : {"gemm_tc_tf32_128", "gemm_tc_tf32_64"}) {
        checkGemm(k, 200, 300, 260, 1, 5e-3);
        checkGemm(k, 129, 70, 36, 3, 5e-3);
        checkGemm(k, 1, 2, 4, 0, 5e-3);
    }
    for (const char* k : {"gemm_tc_bf16_128", "gemm_tc_bf16_64"}) {
        checkGemm(k, 200, 300, 260, 1, 4e-2);
        checkGemm(k, 129, 70, 36, 2, 4e-2);
        checkGemm(k, 1, 2, 4, 0, 4e-2);
    }
    // Split-K: the plan CudaTensorOps uses (slices 0) and forced slice counts, every activation, no bias, K not a
    // multiple of 16 (short last slice), K % 4 != 0 (FP32 kernel only: the tensor-core kernels need K % 4 == 0).
    for (int act = 0; act < 4; ++act) checkGemm("split:gemm_f32", 200, 300, 260, act, 1e-5);
    checkGemm("split:gemm_f32", 131, 301, 257, 1, 1e-5, 3);
    checkGemm("split:gemm_f32", 1, 7, 300, 2, 1e-5, 5, false);
    checkGemm("split:gemm_f32", 128, 768, 3072, 0, 2e-5);                 // BERT FFN down, 1x128: 16 slices
    checkGemm("gemm_tc_tf32x3_64", 200, 300, 260, 1, 2e-5);
    checkGemm("gemm_tc_tf32x3_128", 200, 300, 260, 1, 2e-5);
    const std::pair<const char*, double> splitTc[] = {
        {"split:gemm_tc_tf32_64", 1e-2}, {"split:gemm_tc_tf32x3_64", 2e-5}, {"split:gemm_tc_bf16_64", 8e-2}};
    for (const auto& [k, tol] : splitTc) {
        for (int act = 0; act < 4; ++act) checkGemm(k, 130, 200, 520, act, tol);
        checkGemm(k, 100, 130, 1000, 1, tol, 7, false);                    // last slice 136 (8.5 k-tiles)
        checkGemm(k, 129, 70, 36, 3, tol, 2);                              // 2 slices: 32 and 4 (a partial k-tile)
        checkGemm(k, 128, 768, 3072, 0, tol * 2);                          // BERT FFN down, 1x128
    }
    checkAttention("attention_d64", 3, 77, 3, 64, true);
    checkAttention("attention_d64", 2, 128, 2, 64, false);
    checkAttention("attention_d32", 3, 5, 4, 8, true);
    checkAttention("attention_d32", 2, 33, 2, 32, true);
    checkAttention("attention_d128", 3, 40, 2, 100, true);
    checkAttention("attention_bf16_d64", 3, 77, 3, 64, true, 3e-2);
    checkAttention("attention_bf16_d64", 2, 200, 2, 64, false, 3e-2);
    checkAttention("attention_bf16_d64", 3, 5, 1, 64, true, 3e-2);
    checkAttention("attention_tf32_d64", 3, 77, 3, 64, true, 5e-3);
    checkAttention("attention_tf32_d64", 2, 200, 2, 64, false, 5e-3);
    checkAttention("attention_tf32_d64", 3, 5, 1, 64, true, 5e-3);
    checkLayerNorm(50, 768, true);
    checkLayerNorm(7, 33, false);
    checkEmbeddingAndPooling();
    checkSoftmax(20, 1000, false);
    checkSoftmax(5, 3, true);

    // GEMM throughput.
    const int reps = quick ? 5 : 20;
    const std::vector<std::string> all = {"gemm_f32", "gemm_tc_tf32_128", "gemm_tc_tf32_64", "gemm_tc_bf16_128",
                                          "gemm_tc_bf16_64", "gemm_tc_tf32x3_128", "gemm_tc_tf32x3_64"};
    // Split-K as CudaTensorOps runs it (init + split GEMM; act NONE so no activation pass), timed only for the
    // shapes its plan splits (f32: 128x128 tiles, tensor cores: 64x64 tiles).
    const std::vector<std::string> splits = {"split:gemm_f32", "split:gemm_tc_tf32_64", "split:gemm_tc_tf32x3_64",
                                             "split:gemm_tc_bf16_64"};
    for (const auto& k : all) timeGemm("square", k, 4096, 4096, 4096, reps);
    const int ms[] = {128, 512, 1024, 4096, 16384};               // batch·seq for 1/8/32 × 128/512
    const int nk[][2] = {{2304, 768}, {768, 768}, {3072, 768}, {768, 3072}};   // QKV, out-proj, FFN up, FFN down
    for (int m : ms)
        for (auto& s : nk) {
            for (const auto& k : all) timeGemm("bert", k, m, s[0], s[1], reps);
            for (const auto& k : splits) {
                int tile = k == "split:gemm_f32" ? 128 : 64;
                long tiles = (long) ((s[0] + tile - 1) / tile) * ((m + tile - 1) / tile);
                if (splitSlices(tiles, s[1]) > 1) timeGemm("bert-split", k, m, s[0], s[1], reps);
            }
        }
    for (int b : {1, 8, 32})
        for (int s : {128, 512})
            for (const char* k : {"attention_d64", "attention_bf16_d64", "attention_tf32_d64"}) timeAttention(k, b, s, 12, 64, reps);
    attentionBf16ioSuite(reps);

    return writeResults(argv[2]);
}
