// The LayerNorm part of the harness (harness --ops), included by harness.cu after its helpers (launch, report,
// medianMs, upload, ...): checks of every LayerNorm kernel of ops.ptx against a double CPU reference, FP32 and bf16,
// block- and warp-per-row, then timings at BERT-base's 16384 x 768 (32 x 512 tokens) and 128 x 768 (1 x 128).

// ---------------------------------------------------------------------------------------------------------------------
// LayerNorm kernels (--ops): the block-per-row ones and the warp-per-row ones, FP32 and bf16 activations
// ---------------------------------------------------------------------------------------------------------------------

// toBf16 / fromBf16: harness.cu's (round to nearest even, and back).

// Device activations of n values: FP32, or bf16 (the host values are rounded in place so the reference sees them).
static void* uploadActivations(std::vector<float>& v, bool bf16) {
    if (!bf16) return upload(v);
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
        h[i] = toBf16(v[i]);
        v[i] = fromBf16(h[i]);
    }
    return upload(h);
}

static void* poisonedActivations(size_t n, bool bf16) {
    void* dev;
    CHECK(cudaMalloc(&dev, n * (bf16 ? 2 : 4)));
    CHECK(cudaMemset(dev, 0xFF, n * (bf16 ? 2 : 4)));   // NaN in both types
    return dev;
}

static std::vector<float> downloadActivations(const void* dev, size_t n, bool bf16) {
    if (!bf16) return download((const float*) dev, n);
    std::vector<uint16_t> h(n);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(h.data(), dev, n * 2, cudaMemcpyDeviceToHost));
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = fromBf16(h[i]);
    return out;
}

static bool isBf16Kernel(const std::string& k) { return k.find("bf16") != std::string::npos; }
static bool isWarpKernel(const std::string& k) { return k.find("_warp") != std::string::npos; }

// Launches an add+LayerNorm kernel the way CudaTensorOps does: block kernels (rows) x min(256, cols rounded to a
// warp), warp kernels ceil(rows / (threads / 32)) x threads.
static void launchAddLayerNorm(const std::string& kernel, void* x, void* r, float* g, float* b, void* y, int rows,
                               int cols, float eps, int threads) {
    Args a;
    a.add(x).add(r).add(g).add(b).add(y);
    if (isWarpKernel(kernel)) {
        a.add(rows).add(cols).add(eps);
        int perBlock = threads / 32;
        launch(kernel, dim3((rows + perBlock - 1) / perBlock), dim3(threads), a);
    } else {
        a.add(cols).add(eps);
        launch(kernel, dim3(rows), dim3(std::min(256, (cols + 31) / 32 * 32)), a);
    }
}

static void layerNormReference(const std::vector<float>& pre, const std::vector<float>& gamma,
                               const std::vector<float>& beta, int rows, int cols, float eps,
                               std::vector<double>& ref) {
    ref.assign((size_t) rows * cols, 0.0);
    for (int i = 0; i < rows; ++i) {
        double mean = 0, var = 0;
        for (int c = 0; c < cols; ++c) mean += pre[(size_t) i * cols + c];
        mean /= cols;
        for (int c = 0; c < cols; ++c) {
            double d = pre[(size_t) i * cols + c] - mean;
            var += d * d;
        }
        var /= cols;
        for (int c = 0; c < cols; ++c)
            ref[(size_t) i * cols + c] = (pre[(size_t) i * cols + c] - mean) / std::sqrt(var + eps) * gamma[c] + beta[c];
    }
}

// y = LayerNorm(x + residual) against the double reference; inPlace writes y over x. Tolerance: FP32 near rounding,
// bf16 half an ulp of |y| < 8.
static void checkAddLayerNormKernel(const std::string& kernel, int rows, int cols, bool withResidual, bool inPlace,
                                    int threads = 128) {
    bool bf16 = isBf16Kernel(kernel);
    auto x = randomVector((size_t) rows * cols, 3.0f), r = randomVector((size_t) rows * cols);
    auto gamma = randomVector(cols), beta = randomVector(cols);
    void* dx = uploadActivations(x, bf16);
    void* dr = withResidual ? uploadActivations(r, bf16) : nullptr;
    float *dg = upload(gamma), *db = upload(beta);
    void* dy = inPlace ? dx : poisonedActivations((size_t) rows * cols, bf16);
    float eps = 1e-12f;
    launchAddLayerNorm(kernel, dx, dr, dg, db, dy, rows, cols, eps, threads);
    auto got = downloadActivations(dy, (size_t) rows * cols, bf16);
    std::vector<float> pre((size_t) rows * cols);
    for (size_t i = 0; i < pre.size(); ++i) pre[i] = (float) ((double) x[i] + (withResidual ? r[i] : 0.0));
    std::vector<double> ref;
    layerNormReference(pre, gamma, beta, rows, cols, eps, ref);
    char name[160];
    std::snprintf(name, sizeof name, "%s %dx%d %s%s%s", kernel.c_str(), rows, cols, withResidual ? "residual" : "plain",
                  inPlace ? " in-place" : "", isWarpKernel(kernel) ? (" t" + std::to_string(threads)).c_str() : "");
    report(name, got, ref, bf16 ? 2e-2 : 2e-5);
    cudaFree(dx);
    if (dr) cudaFree(dr);
    cudaFree(dg); cudaFree(db);
    if (!inPlace) cudaFree(dy);
}

static void launchEmbeddingLayerNorm(const std::string& kernel, int* ids, int* types, float* w, float* p, float* t,
                                     float* g, float* b, void* out, int tokens, int S, int hidden, float eps,
                                     int threads) {
    Args a;
    a.add(ids).add(types).add(w).add(p).add(t).add(g).add(b).add(out);
    if (isWarpKernel(kernel)) {
        a.add(tokens).add(S).add(hidden).add(eps);
        int perBlock = threads / 32;
        launch(kernel, dim3((tokens + perBlock - 1) / perBlock), dim3(threads), a);
    } else {
        a.add(S).add(hidden).add(eps);
        launch(kernel, dim3(tokens), dim3(std::min(256, (hidden + 31) / 32 * 32)), a);
    }
}

static void checkEmbeddingLayerNormKernel(const std::string& kernel, int B, int S, int hidden, bool withTypes,
                                          int threads = 128) {
    bool bf16 = isBf16Kernel(kernel);
    const int vocab = 97, types = 2, positions = S + 3, tokens = B * S;
    auto word = randomVector((size_t) vocab * hidden), pos = randomVector((size_t) positions * hidden),
         typ = randomVector((size_t) types * hidden), gamma = randomVector(hidden), beta = randomVector(hidden);
    std::vector<int> ids(tokens), tt(tokens);
    for (int i = 0; i < tokens; ++i) {
        ids[i] = rng() % vocab;
        tt[i] = rng() % types;
    }
    float *dw = upload(word), *dp = upload(pos), *dt = upload(typ), *dg = upload(gamma), *db = upload(beta);
    int *di = upload(ids), *dtt = upload(tt);
    void* dout = poisonedActivations((size_t) tokens * hidden, bf16);
    float eps = 1e-12f;
    launchEmbeddingLayerNorm(kernel, di, withTypes ? dtt : nullptr, dw, dp, dt, dg, db, dout, tokens, S, hidden, eps,
                             threads);
    auto got = downloadActivations(dout, (size_t) tokens * hidden, bf16);
    std::vector<float> pre((size_t) tokens * hidden);
    for (int i = 0; i < tokens; ++i)
        for (int c = 0; c < hidden; ++c)
            pre[(size_t) i * hidden + c] = (float) ((double) word[(size_t) ids[i] * hidden + c] +
                                                    pos[(size_t) (i % S) * hidden + c] +
                                                    typ[(size_t) (withTypes ? tt[i] : 0) * hidden + c]);
    std::vector<double> ref;
    layerNormReference(pre, gamma, beta, tokens, hidden, eps, ref);
    char name[160];
    std::snprintf(name, sizeof name, "%s B%d S%d H%d %s", kernel.c_str(), B, S, hidden,
                  withTypes ? "types" : "no-types");
    report(name, got, ref, bf16 ? 2e-2 : 2e-5);
    cudaFree(dw); cudaFree(dp); cudaFree(dt); cudaFree(dg); cudaFree(db); cudaFree(di); cudaFree(dtt); cudaFree(dout);
}

// Device time of one launch: `per` back-to-back launches between two events, median of `reps` samples.
template <typename F>
static double medianUsPerLaunch(F launchOnce, int per, int reps) {
    double ms = medianMs([&] { for (int i = 0; i < per; ++i) launchOnce(); }, reps);
    return ms * 1e3 / per;
}

static void timeAddLayerNorm(const std::string& kernel, int rows, int cols, bool withResidual, int threads, int reps) {
    bool bf16 = isBf16Kernel(kernel);
    auto x = randomVector((size_t) rows * cols, 3.0f), r = randomVector((size_t) rows * cols);
    auto gamma = randomVector(cols), beta = randomVector(cols);
    void* dx = uploadActivations(x, bf16);
    void* dr = withResidual ? uploadActivations(r, bf16) : nullptr;
    float *dg = upload(gamma), *db = upload(beta);
    void* dy = poisonedActivations((size_t) rows * cols, bf16);
    int per = rows >= 4096 ? 10 : 100;
    double us = medianUsPerLaunch([&] { launchAddLayerNorm(kernel, dx, dr, dg, db, dy, rows, cols, 1e-12f, threads); },
                                  per, reps);
    double bytes = (double) rows * cols * (bf16 ? 2 : 4) * (withResidual ? 3 : 2);
    double gbps = bytes / (us * 1e-6) / 1e9;
    int shownThreads = isWarpKernel(kernel) ? threads : std::min(256, (cols + 31) / 32 * 32);
    std::printf("layernorm  %-26s %6dx%-5d %-8s t%-4d %9.2f us %8.1f GB/s\n", kernel.c_str(), rows, cols,
                withResidual ? "residual" : "plain", shownThreads, us, gbps);
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "{\"bench\": \"layer_norm\", \"kernel\": \"%s\", \"rows\": %d, \"cols\": %d, \"residual\": %s, "
                  "\"threads\": %d, \"us\": %.3f, \"gbps\": %.1f}",
                  kernel.c_str(), rows, cols, withResidual ? "true" : "false", shownThreads, us, gbps);
    entry(buf);
    cudaFree(dx);
    if (dr) cudaFree(dr);
    cudaFree(dg); cudaFree(db); cudaFree(dy);
}

static void timeEmbeddingLayerNorm(const std::string& kernel, int B, int S, int hidden, int threads, int reps) {
    bool bf16 = isBf16Kernel(kernel);
    const int vocab = 30522, tokens = B * S;
    auto word = randomVector((size_t) vocab * hidden), pos = randomVector((size_t) 512 * hidden),
         typ = randomVector((size_t) 2 * hidden), gamma = randomVector(hidden), beta = randomVector(hidden);
    std::vector<int> ids(tokens), tt(tokens, 0);
    for (int i = 0; i < tokens; ++i) ids[i] = rng() % vocab;
    float *dw = upload(word), *dp = upload(pos), *dt = upload(typ), *dg = upload(gamma), *db = upload(beta);
    int *di = upload(ids), *dtt = upload(tt);
    void* dout = poisonedActivations((size_t) tokens * hidden, bf16);
    int per = tokens >= 4096 ? 10 : 100;
    double us = medianUsPerLaunch([&] { launchEmbeddingLayerNorm(kernel, di, dtt, dw, dp, dt, dg, db, dout, tokens, S,
                                                                 hidden, 1e-12f, threads); }, per, reps);
    double bytes = (double) tokens * hidden * (3 * 4 + (bf16 ? 2 : 4));
    double gbps = bytes / (us * 1e-6) / 1e9;
    int shownThreads = isWarpKernel(kernel) ? threads : std::min(256, (hidden + 31) / 32 * 32);
    std::printf("embedding  %-26s %6dx%-5d          t%-4d %9.2f us %8.1f GB/s\n", kernel.c_str(), tokens, hidden,
                shownThreads, us, gbps);
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "{\"bench\": \"embedding_layer_norm\", \"kernel\": \"%s\", \"rows\": %d, \"cols\": %d, "
                  "\"threads\": %d, \"us\": %.3f, \"gbps\": %.1f}",
                  kernel.c_str(), tokens, hidden, shownThreads, us, gbps);
    entry(buf);
    cudaFree(dw); cudaFree(dp); cudaFree(dt); cudaFree(dg); cudaFree(db); cudaFree(di); cudaFree(dtt); cudaFree(dout);
}

// --ops: only the row kernels of ops.ptx that CudaTensorOps uses for LayerNorm: checks, then timings at BERT-base's
// 16384 x 768 (32 x 512 tokens) and 128 x 768 (1 x 128).
static int runOps(const std::string& ptxDir, const std::string& outPath, int reps) {
    const std::vector<std::string> addKernels = {"add_layer_norm", "add_layer_norm_warp", "add_layer_norm_bf16",
                                                 "add_layer_norm_bf16_reg", "add_layer_norm_warp_bf16"};
    const std::vector<std::string> embeddingKernels = {"embedding_layer_norm", "embedding_layer_norm_warp",
                                                       "embedding_layer_norm_bf16", "embedding_layer_norm_warp_bf16"};
    std::vector<std::string> all = addKernels;
    all.insert(all.end(), embeddingKernels.begin(), embeddingKernels.end());
    loadPtx(ptxDir, "ops", all);

    // Block kernels: any row length (the bf16 register kernel up to 8 columns a thread).
    for (const char* k : {"add_layer_norm", "add_layer_norm_bf16"}) {
        checkAddLayerNormKernel(k, 50, 768, true, false);
        checkAddLayerNormKernel(k, 7, 33, false, false);
        checkAddLayerNormKernel(k, 5, 768, true, true);
    }
    checkAddLayerNormKernel("add_layer_norm_bf16", 4, 4096, true, false);
    checkAddLayerNormKernel("add_layer_norm_bf16_reg", 50, 768, true, false);
    checkAddLayerNormKernel("add_layer_norm_bf16_reg", 9, 2048, false, true);
    // Warp kernels: 1 to 8 chunks of 32 vectors, rows not a multiple of the warps per block, in place, every block size.
    for (int threads : {32, 64, 128, 256}) {
        checkAddLayerNormKernel("add_layer_norm_warp", 50, 768, true, false, threads);
        checkAddLayerNormKernel("add_layer_norm_warp_bf16", 50, 768, true, false, threads);
    }
    for (int cols : {128, 384, 1024}) checkAddLayerNormKernel("add_layer_norm_warp", 13, cols, true, false);
    for (int cols : {256, 1024, 2048}) checkAddLayerNormKernel("add_layer_norm_warp_bf16", 13, cols, true, false);
    checkAddLayerNormKernel("add_layer_norm_warp", 7, 768, false, false);
    checkAddLayerNormKernel("add_layer_norm_warp", 7, 768, true, true);
    checkAddLayerNormKernel("add_layer_norm_warp_bf16", 7, 768, false, false);
    checkAddLayerNormKernel("add_layer_norm_warp_bf16", 7, 768, true, true);
    for (const auto& k : embeddingKernels) {
        checkEmbeddingLayerNormKernel(k, 3, 17, 768, true);
        checkEmbeddingLayerNormKernel(k, 2, 5, 768, false);
    }
    checkEmbeddingLayerNormKernel("embedding_layer_norm", 3, 17, 96, true);
    checkEmbeddingLayerNormKernel("embedding_layer_norm_warp", 3, 17, 1024, true, 64);
    checkEmbeddingLayerNormKernel("embedding_layer_norm_warp_bf16", 3, 17, 256, true, 256);

    for (int rows : {16384, 128}) {
        for (bool residual : {true, false}) {
            timeAddLayerNorm("add_layer_norm", rows, 768, residual, 256, reps);
            timeAddLayerNorm("add_layer_norm_bf16_reg", rows, 768, residual, 256, reps);
            timeAddLayerNorm("add_layer_norm_bf16", rows, 768, residual, 256, reps);
            for (int threads : {32, 64, 128, 256}) {
                timeAddLayerNorm("add_layer_norm_warp", rows, 768, residual, threads, reps);
                timeAddLayerNorm("add_layer_norm_warp_bf16", rows, 768, residual, threads, reps);
            }
        }
    }
    for (auto [B, S] : {std::pair<int, int>{32, 512}, std::pair<int, int>{1, 128}}) {
        timeEmbeddingLayerNorm("embedding_layer_norm", B, S, 768, 256, reps);
        timeEmbeddingLayerNorm("embedding_layer_norm_bf16", B, S, 768, 256, reps);
        for (int threads : {32, 128}) {
            timeEmbeddingLayerNorm("embedding_layer_norm_warp", B, S, 768, threads, reps);
            timeEmbeddingLayerNorm("embedding_layer_norm_warp_bf16", B, S, 768, threads, reps);
        }
    }
    json << "\n  ],\n  \"failures\": " << failures << "\n}\n";
    std::ofstream out(outPath);
    out << json.str();
    std::printf("checks failed: %d\n", failures);
    return failures == 0 ? 0 : 1;
}

