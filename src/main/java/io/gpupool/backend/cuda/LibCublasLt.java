package io.gpupool.backend.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * A small FFM binding to NVIDIA's {@code libcublasLt}: the dozen functions a row-major linear layer needs
 * (handle, matmul descriptor, matrix layouts, heuristic preference, heuristic query, matmul; an algorithm's
 * configuration attributes, to name it). Like
 * {@link LibCuda}, every opaque handle and every device pointer travels as a {@code long}; host-side structures
 * (the 96-byte heuristic result, attribute values) live in segments the caller owns.
 * <pre>
 *   cublasLtMatmulHeuristicResult_t (96 bytes)
 *   0   cublasLtMatmulAlgo_t algo  (8 x uint64, opaque; passed back to cublasLtMatmul by address)
 *   64  size_t  workspaceSize
 *   72  int     state             (cublasStatus_t of this result)
 *   76  float   wavesCount
 *   80  int[4]  reserved
 * </pre>
 *
 * <h2>Finding the library</h2>
 * {@link #load} tries, in order: the folder the operator configured (only that folder when one is given), else the
 * dynamic linker's own search (LD_LIBRARY_PATH, the ld.so cache), then the CUDA toolkit's usual folders
 * ({@code /usr/local/cuda/lib64}, {@code /usr/local/cuda*}{@code /targets/x86_64-linux/lib}). Each place is asked for
 * {@code libcublasLt.so.13}, then {@code .so.12}, then the unversioned name. The official
 * {@code nvidia/cuda:13.x-runtime} images ship the library in {@code /usr/local/cuda/lib64}, on the linker path.
 * A failure never throws: it returns the places tried, for the one log line the caller writes.
 */
final class LibCublasLt {

    static final List<String> NAMES = List.of("libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so");
    static final List<Path> TOOLKIT_FOLDERS = List.of(Path.of("/usr/local/cuda/lib64"),
            Path.of("/usr/local/cuda/targets/x86_64-linux/lib"));

    // cublasComputeType_t, cudaDataType_t
    static final int COMPUTE_32F = 68;
    static final int COMPUTE_32F_FAST_TF32 = 77;
    static final int R_32F = 0;
    static final int R_16BF = 14;
    // cublasLtMatmulDescAttributes_t
    static final int DESC_TRANSA = 3;
    static final int DESC_TRANSB = 4;
    static final int DESC_EPILOGUE = 7;
    static final int DESC_BIAS_POINTER = 8;
    // cublasLtEpilogue_t
    static final int EPILOGUE_DEFAULT = 1;
    static final int EPILOGUE_BIAS = 4;
    static final int EPILOGUE_RELU_BIAS = 6;
    static final int EPILOGUE_GELU_BIAS = 36;
    // cublasOperation_t
    static final int OP_N = 0;
    static final int OP_T = 1;
    // cublasLtMatmulPreferenceAttributes_t
    static final int PREF_MAX_WORKSPACE_BYTES = 1;
    static final int PREF_MIN_ALIGNMENT_A = 5;
    static final int PREF_MIN_ALIGNMENT_B = 6;
    static final int PREF_MIN_ALIGNMENT_C = 7;
    static final int PREF_MIN_ALIGNMENT_D = 8;
    static final long HEURISTIC_RESULT_BYTES = 96;
    static final long ALGO_BYTES = 64;
    static final long HEURISTIC_WORKSPACE_OFFSET = 64;
    static final long HEURISTIC_STATE_OFFSET = 72;
    // cublasLtMatmulAlgoConfigAttributes_t (each a 32-bit value)
    static final int ALGO_CONFIG_ID = 0;
    static final int ALGO_CONFIG_TILE_ID = 1;
    static final int ALGO_CONFIG_SPLITK_NUM = 2;
    static final int ALGO_CONFIG_STAGES_ID = 6;
    static final int STATUS_SUCCESS = 0;
    static final int STATUS_NOT_SUPPORTED = 15;

    /** Where the library came from (a path, or a bare name the dynamic linker resolved). */
    final String source;
    private final MethodHandle create;
    private final MethodHandle destroy;
    private final MethodHandle getVersion;
    private final MethodHandle getStatusName;
    private final MethodHandle descCreate;
    private final MethodHandle descDestroy;
    private final MethodHandle descSetAttribute;
    private final MethodHandle layoutCreate;
    private final MethodHandle layoutDestroy;
    private final MethodHandle preferenceCreate;
    private final MethodHandle preferenceDestroy;
    private final MethodHandle preferenceSetAttribute;
    private final MethodHandle algoGetHeuristic;
    private final MethodHandle matmul;
    private final MethodHandle algoConfigGetAttribute;

    private LibCublasLt(SymbolLookup lib, String source) {
        this.source = source;
        Linker linker = Linker.nativeLinker();
        create = bind(linker, lib, "cublasLtCreate", JAVA_INT, JAVA_LONG);
        destroy = bind(linker, lib, "cublasLtDestroy", JAVA_INT, JAVA_LONG);
        getVersion = bind(linker, lib, "cublasLtGetVersion", JAVA_LONG);
        getStatusName = bind(linker, lib, "cublasLtGetStatusName", ADDRESS, JAVA_INT);
        descCreate = bind(linker, lib, "cublasLtMatmulDescCreate", JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_INT);
        descDestroy = bind(linker, lib, "cublasLtMatmulDescDestroy", JAVA_INT, JAVA_LONG);
        descSetAttribute = bind(linker, lib, "cublasLtMatmulDescSetAttribute", JAVA_INT,
                JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_LONG);
        layoutCreate = bind(linker, lib, "cublasLtMatrixLayoutCreate", JAVA_INT,
                JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG);
        layoutDestroy = bind(linker, lib, "cublasLtMatrixLayoutDestroy", JAVA_INT, JAVA_LONG);
        preferenceCreate = bind(linker, lib, "cublasLtMatmulPreferenceCreate", JAVA_INT, JAVA_LONG);
        preferenceDestroy = bind(linker, lib, "cublasLtMatmulPreferenceDestroy", JAVA_INT, JAVA_LONG);
        preferenceSetAttribute = bind(linker, lib, "cublasLtMatmulPreferenceSetAttribute", JAVA_INT,
                JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_LONG);
        algoGetHeuristic = bind(linker, lib, "cublasLtMatmulAlgoGetHeuristic", JAVA_INT,
                JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_LONG,
                JAVA_LONG);
        matmul = bind(linker, lib, "cublasLtMatmul", JAVA_INT,
                JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG,
                JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG);
        algoConfigGetAttribute = bind(linker, lib, "cublasLtMatmulAlgoConfigGetAttribute", JAVA_INT,
                JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG);
    }

    /** The outcome of {@link #load}: the binding, or why there is none. */
    record Loaded(Optional<LibCublasLt> library, List<String> tried, String failure) {
    }

    /**
     * Opens the library (see the class comment for the search order); {@code folder} null means no configured
     * folder. {@code names} and {@code toolkitFolders} are parameters so that tests can make the search miss.
     */
    static Loaded load(Path folder, List<String> names, List<Path> toolkitFolders) {
        List<String> tried = new ArrayList<>();
        List<String> candidates = new ArrayList<>();
        if (folder != null) {
            names.forEach(name -> candidates.add(folder.resolve(name).toString()));
        } else {
            candidates.addAll(names);
            for (Path dir : expand(toolkitFolders)) {
                names.forEach(name -> candidates.add(dir.resolve(name).toString()));
            }
        }
        String lastFailure = "not found";
        for (String candidate : candidates) {
            if (candidate.contains("/") && !Files.exists(Path.of(candidate))) {
                continue;
            }
            tried.add(candidate);
            try {
                SymbolLookup lookup = SymbolLookup.libraryLookup(candidate, Arena.global());
                return new Loaded(Optional.of(new LibCublasLt(lookup, candidate)), tried, null);
            } catch (IllegalArgumentException | IllegalStateException | UnsatisfiedLinkError e) {
                lastFailure = candidate + ": " + e.getMessage();
            }
        }
        String where = folder != null ? "in " + folder + " (gpupool.kernels.cublas-lt-dir)"
                : "on the library path or in " + toolkitFolders;
        return new Loaded(Optional.empty(), tried, "no usable " + names.getFirst() + " " + where
                + (tried.isEmpty() ? "" : "; last error " + lastFailure));
    }

    /** The given folders plus, for {@code /usr/local/cuda/...}, the same path under every {@code /usr/local/cuda-*}. */
    private static List<Path> expand(List<Path> folders) {
        List<Path> out = new ArrayList<>(folders);
        Path local = Path.of("/usr/local");
        if (Files.isDirectory(local)) {
            try (Stream<Path> entries = Files.list(local)) {
                entries.filter(p -> p.getFileName().toString().startsWith("cuda-")).sorted().forEach(p ->
                        out.add(p.resolve("targets/x86_64-linux/lib")));
            } catch (java.io.IOException | RuntimeException ignored) {
                // an unreadable /usr/local only narrows the search
            }
        }
        return out;
    }

    private static MethodHandle bind(Linker linker, SymbolLookup lib, String name, MemoryLayout result,
                                     MemoryLayout... args) {
        MemorySegment symbol = lib.find(name).orElseThrow(
                () -> new IllegalStateException("libcublasLt has no symbol " + name + " (library too old?)"));
        return linker.downcallHandle(symbol, FunctionDescriptor.of(result, args));
    }

    /** "cuBLASLt 13.1.0" from cublasLtGetVersion (major·10000 + minor·100 + patch). */
    String description() {
        long v = (long) invoke(() -> (long) getVersion.invokeExact());
        return "cuBLASLt " + (v / 10000) + "." + (v / 100 % 100) + "." + (v % 100);
    }

    String statusName(int status) {
        try {
            MemorySegment name = (MemorySegment) getStatusName.invokeExact(status);
            return name.equals(MemorySegment.NULL) ? "cublasStatus " + status
                    : name.reinterpret(256).getString(0);
        } catch (Throwable t) {
            return "cublasStatus " + status;
        }
    }

    void check(String call, int status, String detail) {
        if (status != STATUS_SUCCESS) {
            throw new CublasException(call, status, statusName(status), detail);
        }
    }

    long createHandle() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            check("cublasLtCreate", (int) invoke(() -> (int) create.invokeExact(out.address())), null);
            return out.get(JAVA_LONG, 0);
        }
    }

    void destroyHandle(long handle) {
        check("cublasLtDestroy", (int) invoke(() -> (int) destroy.invokeExact(handle)), null);
    }

    long createDesc(int computeType, int scaleType, String detail) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            check("cublasLtMatmulDescCreate",
                    (int) invoke(() -> (int) descCreate.invokeExact(out.address(), computeType, scaleType)), detail);
            return out.get(JAVA_LONG, 0);
        }
    }

    int destroyDesc(long desc) {
        return (int) invoke(() -> (int) descDestroy.invokeExact(desc));
    }

    /** Sets a descriptor attribute from {@code value} (host memory of {@code bytes} bytes); returns the status. */
    int setDescAttribute(long desc, int attribute, long value, long bytes) {
        return (int) invoke(() -> (int) descSetAttribute.invokeExact(desc, attribute, value, bytes));
    }

    long createLayout(int type, long rows, long cols, long ld, String detail) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            check("cublasLtMatrixLayoutCreate",
                    (int) invoke(() -> (int) layoutCreate.invokeExact(out.address(), type, rows, cols, ld)), detail);
            return out.get(JAVA_LONG, 0);
        }
    }

    int destroyLayout(long layout) {
        return (int) invoke(() -> (int) layoutDestroy.invokeExact(layout));
    }

    long createPreference() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            check("cublasLtMatmulPreferenceCreate",
                    (int) invoke(() -> (int) preferenceCreate.invokeExact(out.address())), null);
            return out.get(JAVA_LONG, 0);
        }
    }

    int destroyPreference(long preference) {
        return (int) invoke(() -> (int) preferenceDestroy.invokeExact(preference));
    }

    int setPreferenceAttribute(long preference, int attribute, long value, long bytes) {
        return (int) invoke(() -> (int) preferenceSetAttribute.invokeExact(preference, attribute, value, bytes));
    }

    /** Asks for up to {@code requested} algorithms into {@code results}; returns how many were written. */
    int heuristic(long handle, long desc, long a, long b, long c, long d, long preference, int requested,
                  MemorySegment results, String detail) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment count = arena.allocate(JAVA_INT);
            check("cublasLtMatmulAlgoGetHeuristic", (int) invoke(() -> (int) algoGetHeuristic.invokeExact(handle,
                    desc, a, b, c, d, preference, requested, results.address(), count.address())), detail);
            return count.get(JAVA_INT, 0);
        }
    }

    /**
     * One 32-bit configuration attribute of the algorithm at {@code algo} (a heuristic result's first 64 bytes), or
     * -1 where the library does not report it: for naming the algorithm a plan runs, never for choosing it.
     */
    int algoConfig(long algo, int attribute) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment value = arena.allocate(JAVA_INT);
            MemorySegment written = arena.allocate(JAVA_LONG);
            int status = (int) invoke(() -> (int) algoConfigGetAttribute.invokeExact(algo, attribute, value.address(),
                    4L, written.address()));
            return status == STATUS_SUCCESS ? value.get(JAVA_INT, 0) : -1;
        }
    }

    /** cublasLtMatmul; every argument an address (host scalars and algo in native memory); returns the status. */
    int matmul(long handle, long desc, long alpha, long a, long aDesc, long b, long bDesc, long beta, long c,
               long cDesc, long d, long dDesc, long algo, long workspace, long workspaceBytes, long stream) {
        try {
            return (int) matmul.invokeExact(handle, desc, alpha, a, aDesc, b, bDesc, beta, c, cDesc, d, dDesc, algo,
                    workspace, workspaceBytes, stream);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    @FunctionalInterface
    private interface Call {
        Object call() throws Throwable;
    }

    private static Object invoke(Call call) {
        try {
            return call.call();
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }
}
