package io.gpupool.kernels.cuda;

import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.MatmulLibrary;
import io.gpupool.kernels.TensorOps.Activation;
import io.gpupool.kernels.TensorOps.GemmChoice;
import io.gpupool.kernels.cuda.CudaTensorOpsLaunchTest.Launch;
import io.gpupool.kernels.cuda.CudaTensorOpsLaunchTest.RecordingDevice;
import io.gpupool.kernels.cuda.CudaTensorOpsLaunchTest.RecordingStream;
import io.gpupool.serving.fake.CountingAllocator;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

/**
 * {@code gpupool.kernels.gemm-tuning} without a GPU: a fake cuBLASLt offers named algorithms and a timer plays the
 * device clock by looking at what each timed batch enqueued, so the test decides which candidate is fastest. Checked:
 * the fastest candidate (library algorithm or gpupool's own kernel) is chosen, measured once per shape for all
 * streams, and runs from then on; a candidate that fails is skipped and the product still runs; the choices are
 * reported; nothing is measured with the setting off, while a stream captures, or when the output is an input.
 */
class GemmTuningTest {

    /** What an enqueued batch of runs of one candidate costs per run, by the name of what it ran. */
    private final Map<String, Double> millisPerRun = new HashMap<>();
    private final List<String> timed = new ArrayList<>();
    private final RecordingDevice device = new RecordingDevice();
    private final RecordingStream stream = new RecordingStream(device);
    private final TuningLibrary library = new TuningLibrary();
    private final CountingAllocator pool = new CountingAllocator(1L << 30);

    /** The device clock: runs the batch and prices it by what it enqueued (a library algorithm or own kernels). */
    private final GemmTuner.Timer timer = (timedStream, work) -> {
        List<Launch> launches = ((RecordingStream) timedStream).launches;
        int runsBefore = library.runs.size();
        int launchesBefore = launches.size();
        work.run();
        boolean libraryRan = library.runs.size() > runsBefore;
        String ran = libraryRan ? library.runs.getLast().algorithm() : launches.getLast().kernel();
        long count = libraryRan ? library.runs.size() - runsBefore
                : launches.subList(launchesBefore, launches.size()).stream().filter(l -> l.kernel().equals(ran)).count();
        timed.add(ran);
        return count * millisPerRun.getOrDefault(ran, 10.0);
    };

    record Run(String algorithm, DeviceStream stream, long x, long y, long workspace) {
    }

    /**
     * Offers the algorithms {@link #offered} for every shape (the first is what {@link #plan} takes), each plan
     * running under its name; an algorithm in {@link #failing} is refused at run time, as cuBLASLt refuses an
     * algorithm with a status. Each algorithm needs {@link #workspaceNeeds} bytes of workspace (default 1 KiB).
     */
    static final class TuningLibrary implements MatmulLibrary {
        List<String> offered = List.of("a0", "a1", "a2");
        Set<String> failing = Set.of();
        Map<String, Long> workspaceNeeds = new HashMap<>();
        final List<Run> runs = new ArrayList<>();
        int plansMade;
        int candidateQueries;
        int twins;
        int closed;

        @Override
        public String description() {
            return "fakeLt 3.0";
        }

        @Override
        public long workspaceBytes() {
            return 1 << 20;
        }

        @Override
        public long workspaceBytes(Matmul plan) {
            return workspaceNeeds.getOrDefault(plan.algorithm(), 1024L);
        }

        @Override
        public Matmul plan(int rows, int in, int out, ElementType type, Compute compute, Epilogue epilogue) {
            return make(offered.getFirst());
        }

        @Override
        public Matmul planResidual(int rows, int in, int out, ElementType type, Compute compute, Epilogue epilogue) {
            return make(offered.getFirst());
        }

        @Override
        public List<Matmul> candidates(int rows, int in, int out, ElementType type, Compute compute,
                                       Epilogue epilogue, boolean residual, int count) {
            candidateQueries++;
            return offered.stream().limit(count).map(this::make).toList();
        }

        private Matmul make(String algorithm) {
            plansMade++;
            return new Matmul() {
                @Override
                public String algorithm() {
                    return algorithm;
                }

                @Override
                public Matmul twin() {
                    twins++;
                    return make(algorithm);
                }

                @Override
                public void run(DeviceStream stream, long x, long w, long bias, long residual, long y,
                                long workspace) {
                    if (failing.contains(algorithm)) {
                        throw new IllegalStateException("cublasLtMatmul failed: CUBLAS_STATUS_NOT_SUPPORTED");
                    }
                    runs.add(new Run(algorithm, stream, x, y, workspace));
                }

                @Override
                public void close() {
                    closed++;
                }
            };
        }
    }

    private CudaTensorOps ops(Precision precision, boolean tuning) {
        return new CudaTensorOps(device, precision, library, pool, new KernelOptions(false, false, true, tuning), timer);
    }

    @Test
    void theFastestAlgorithmIsChosenOnceForAllStreamsAndRunsFromThenOn() {
        millisPerRun.putAll(Map.of("a0", 2.0, "a1", 1.0, "a2", 3.0, "linear_bf16_warp", 5.0));
        CudaTensorOps ops = ops(Precision.BF16, true);

        ops.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 128, 768, 3072, Activation.GELU);
        assertThat(library.candidateQueries).isOne();
        // a first round over the three algorithms and the own kernel; a2 (3 ms) and the own kernel (5 ms), more than
        // twice the best (1 ms), are not measured again; then a1 against the heuristic's a0, taking turns first
        assertThat(timed).containsExactly("a0", "a1", "a2", "linear_bf16_warp", "a0", "a1", "a0", "a1",
                "a1", "a0", "a0", "a1", "a1", "a0", "a0", "a1", "a1", "a0");
        Run product = library.runs.getLast();
        assertThat(product.algorithm()).as("the product itself, after the measurement").isEqualTo("a1");
        assertThat(List.of(product.x(), product.y())).containsExactly(0x1000L, 0x4000L);

        int timings = timed.size();
        library.runs.clear();
        stream.launches.clear();
        ops.linear(stream, 0x1100, 0x2000, 0x3000, 0x4100, 128, 768, 3072, Activation.GELU);
        RecordingStream other = new RecordingStream(device, 1);
        ops.linear(other, 0x1200, 0x2000, 0x3000, 0x4200, 128, 768, 3072, Activation.GELU);
        assertThat(timed).as("measured once for every stream").hasSize(timings);
        assertThat(library.candidateQueries).isOne();
        assertThat(library.runs).extracting(Run::algorithm).containsExactly("a1", "a1");
        assertThat(library.runs.getLast().stream()).isSameAs(other);
        assertThat(library.twins).as("the other stream runs a copy of the winning plan").isOne();
        assertThat(stream.launches).as("the GELU is fused in the bf16 epilogue: no own kernel runs").isEmpty();

        assertThat(ops.gemmChoices()).singleElement().satisfies(choice -> {
            assertThat(choice.shape()).isEqualTo("128x768->3072 BF16 BIAS_GELU");
            assertThat(choice.engine()).isEqualTo("fakeLt 3.0 a1");
            assertThat(choice.millis()).isCloseTo(1.0, within(1e-9));
            assertThat(choice.heuristicMillis()).isCloseTo(2.0, within(1e-9));
            assertThat(choice.candidates()).isEqualTo(4);
        });
        ops.close();
        assertThat(library.closed).as("every plan made, the losers at once, the winner and its twin at close")
                .isEqualTo(library.plansMade);
        assertThat(pool.allocatedBytes.get()).isZero();
    }

    @Test
    void whereTheOwnKernelIsFasterItRunsTheShapeOnEveryStream() {
        millisPerRun.putAll(Map.of("a0", 2.0, "a1", 3.0, "a2", 4.0, "gemm_f32_splitk", 0.5));
        CudaTensorOps ops = ops(Precision.FP32, true);

        ops.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 16, 3072, 768, Activation.NONE);
        int runsAfterTuning = library.runs.size();
        stream.launches.clear();
        ops.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 16, 3072, 768, Activation.NONE);
        RecordingStream other = new RecordingStream(device, 1);
        ops.linear(other, 0x1000, 0x2000, 0x3000, 0x4000, 16, 3072, 768, Activation.NONE);

        assertThat(library.runs).as("no library run after the measurement").hasSize(runsAfterTuning);
        assertThat(stream.launches).extracting(Launch::kernel).containsExactly("gemm_splitk_init", "gemm_f32_splitk");
        assertThat(other.launches).extracting(Launch::kernel).containsExactly("gemm_splitk_init", "gemm_f32_splitk");
        GemmChoice choice = ops.gemmChoices().getFirst();
        assertThat(choice.engine()).isEqualTo(GemmEngine.OWN_NAME + " (gemm_f32 split-K)");
        assertThat(choice.millis()).isCloseTo(0.5, within(1e-9));
        ops.close();
        assertThat(library.closed).as("every library plan closed once the own kernel won")
                .isEqualTo(library.plansMade);
    }

    @Test
    void aFailingCandidateIsSkippedAndTheProductStillRuns() {
        library.failing = Set.of("a1");
        millisPerRun.putAll(Map.of("a0", 2.0, "a1", 0.1, "a2", 1.5, "linear_bf16_warp", 9.0));
        CudaTensorOps ops = ops(Precision.BF16, true);

        ops.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 64, 768, 768, Activation.NONE);
        assertThat(timed).doesNotContain("a1");
        assertThat(library.runs.getLast().algorithm()).isEqualTo("a2");
        assertThat(ops.gemmChoices().getFirst().engine()).isEqualTo("fakeLt 3.0 a2");

        // every library candidate refused, and a shape the library offers nothing for: the own kernel runs it
        library.failing = Set.of("a0", "a1", "a2");
        millisPerRun.put("linear_bf16_warp", 9.0);
        stream.launches.clear();
        ops.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 32, 768, 768, Activation.NONE);
        assertThat(stream.launches.getLast().kernel()).isEqualTo("linear_bf16_warp");
        library.offered = List.of();
        stream.launches.clear();
        ops.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 8, 768, 768, Activation.NONE);
        assertThat(stream.launches.getLast().kernel()).isEqualTo("linear_bf16_warp");
        assertThat(ops.gemmChoices()).extracting(GemmChoice::shape).containsExactlyInAnyOrder(
                "64x768->768 BF16 BIAS", "32x768->768 BF16 BIAS", "8x768->768 BF16 BIAS");
        assertThat(ops.gemmChoices()).filteredOn(c -> c.shape().startsWith("8x")).singleElement()
                .satisfies(c -> assertThat(c.heuristicMillis()).isNaN());
    }

    @Test
    void aCandidateNeedingMoreWorkspaceThanTheStreamHasIsNotRun() {
        library.workspaceNeeds.put("a1", 2L << 20);   // above the 1 MiB the stream's workspace holds
        millisPerRun.putAll(Map.of("a0", 2.0, "a1", 0.1, "a2", 1.5, "linear_bf16_warp", 9.0));
        CudaTensorOps ops = ops(Precision.BF16, true);
        ops.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 64, 768, 768, Activation.NONE);
        assertThat(timed).doesNotContain("a1");
        assertThat(library.runs.getLast().algorithm()).isEqualTo("a2");
        assertThat(ops.gemmChoices().getFirst().candidates()).isEqualTo(3);
    }

    @Test
    void withTheSettingOffNothingIsMeasured() {
        millisPerRun.putAll(Map.of("a0", 2.0, "a1", 1.0));
        CudaTensorOps ops = ops(Precision.BF16, false);
        ops.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 128, 768, 3072, Activation.GELU);
        assertThat(library.candidateQueries).isZero();
        assertThat(timed).isEmpty();
        assertThat(library.runs).extracting(Run::algorithm).containsExactly("a0");
        assertThat(ops.gemmChoices()).isEmpty();
    }

    @Test
    void aCapturingStreamOrAnOutputThatIsAnInputKeepsTheHeuristicsChoiceUnmeasured() {
        millisPerRun.putAll(Map.of("a0", 2.0, "a1", 1.0));
        CudaTensorOps ops = ops(Precision.BF16, true);
        RecordingStream capturing = new RecordingStream(device, 2);
        ops.useWorkspace(capturing, 0x100000, ops.workspaceBound());
        capturing.capturing = true;
        ops.linear(capturing, 0x1000, 0x2000, 0x3000, 0x4000, 128, 768, 768, Activation.NONE);
        ops.linear(stream, 0x1000, 0x2000, 0x3000, 0x1000, 16, 768, 768, Activation.NONE);   // y = x
        assertThat(timed).isEmpty();
        assertThat(library.runs).extracting(Run::algorithm).containsExactly("a0", "a0");
        assertThat(ops.gemmChoices()).isEmpty();

        // measured later on a serving stream, the choice reaches a new capture stream as a twin, unmeasured there
        ops.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 128, 768, 768, Activation.NONE);
        RecordingStream next = new RecordingStream(device, 3);
        ops.useWorkspace(next, 0x100000, ops.workspaceBound());
        next.capturing = true;
        int timings = timed.size();
        ops.linear(next, 0x1000, 0x2000, 0x3000, 0x4000, 128, 768, 768, Activation.NONE);
        assertThat(timed).hasSize(timings);
        assertThat(library.runs.getLast().algorithm()).isEqualTo("a1");
        assertThat(library.runs.getLast().workspace()).isEqualTo(0x100000L);
    }
}
