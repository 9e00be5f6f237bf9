package io.gpupool.replay;

import io.gpupool.memory.trace.Trace;

import java.util.SplittableRandom;

/**
 * The pool's view of the server under its default load with request arenas ({@code gpupool.serving.request-arena}):
 * a few streams, each running one forward at a time in one block, its arena, released after the forward's final
 * synchronise; the requests come from a closed loop of more clients than streams, so a stream takes its next
 * request as soon as it released the last one.
 *
 * <h2>The model</h2>
 * <pre>
 *   B uniform in [1, batchMax], S = round(seqMedian x exp(seqSigma x N(0, 1))) clamped to [1, seqMax]
 *   arena(B, S)   = B x S x bytesPerToken, rounded up to 256 B
 *                   (the BERT-base plan packs 6 x hidden activations per token plus the token ids:
 *                    6 x 768 x 2 + 4 = 9 220 B at BF16, 18 436 B at FP32; ArenaPackingBench)
 *   duration      = fixedTokens + B x S           (a forward's device time, in token units)
 *
 *   stream 0  |A0 ...... F0|A4 .. F4|A7 ........... F7|     A = allocate the arena, F = free it
 *   stream 1  |A1 ... F1|A3 ........ F3|A6 .. F6|
 *   stream 2  |A2 ............ F2|A5 .. F5|
 *   t --------------------------------------------------&gt;   events in time order; at one instant a
 *                                                            stream's free comes before its next allocate
 * </pre>
 * Before the first request every stream allocates a block that stays for the whole trace ({@code workspaceBytes};
 * the server's cuBLASLt workspace, 32 MiB per stream on CUDA), on no stream of its own, so that the streams'
 * request ends stay visible to {@link FenceTiming.RequestEnd}. An arena is freed after its stream synchronised,
 * so the replay's fences can complete at once (the default timing). The same seed gives the same trace.
 */
public final class ServingArenaTrace {

    /** Generator parameters; {@link #bf16Default()} gives the server's default load on BERT-base at BF16. */
    public record Config(int requests, int streams, long seed, int batchMax, double seqMedian, double seqSigma,
                         int seqMax, long bytesPerToken, long fixedTokens, long workspaceBytes) {
        public Config {
            if (requests <= 0 || streams <= 0 || batchMax <= 0 || seqMax <= 0 || bytesPerToken <= 0
                    || fixedTokens < 0 || workspaceBytes < 0 || !(seqMedian >= 1) || !(seqSigma >= 0)) {
                throw new IllegalArgumentException("invalid serving-arena trace parameters: " + this);
            }
        }

        /**
         * tools/compare-allocators.sh full: batch 1–32, sequence median 96, log-σ 0.7, at most 512; 4 streams
         * (gpupool.serving.streams-per-device); BF16 activations; a 32 MiB workspace per stream; 4 000 requests.
         */
        public static Config bf16Default() {
            return new Config(4000, 4, 42, 32, 96, 0.7, 512, BF16_BYTES_PER_TOKEN, 1000, 32L << 20);
        }

        /** The BERT-base plan's arena bytes per token: 6 hidden activations of 768 values plus the token id. */
        public static final long BF16_BYTES_PER_TOKEN = 6 * 768 * 2 + 4;
        public static final long FP32_BYTES_PER_TOKEN = 6 * 768 * 4 + 4;

        /** The same load with activations of another width. */
        public Config withBytesPerToken(long bytes) {
            return new Config(requests, streams, seed, batchMax, seqMedian, seqSigma, seqMax, bytes, fixedTokens,
                    workspaceBytes);
        }

        public Config withRequests(int n) {
            return new Config(n, streams, seed, batchMax, seqMedian, seqSigma, seqMax, bytesPerToken, fixedTokens,
                    workspaceBytes);
        }

        public Config withStreams(int n) {
            return new Config(requests, n, seed, batchMax, seqMedian, seqSigma, seqMax, bytesPerToken, fixedTokens,
                    workspaceBytes);
        }

        /** The same load with requests of another shape: batch uniform in [1, batchMax], the sequence as above. */
        public Config withShape(int batch, double median, double sigma, int max) {
            return new Config(requests, streams, seed, batch, median, sigma, max, bytesPerToken, fixedTokens,
                    workspaceBytes);
        }

        public Config withSeed(long s) {
            return new Config(requests, streams, s, batchMax, seqMedian, seqSigma, seqMax, bytesPerToken, fixedTokens,
                    workspaceBytes);
        }
    }

    private ServingArenaTrace() {
    }

    public static Trace generate(Config config) {
        SplittableRandom random = new SplittableRandom(config.seed());
        int streams = config.streams();
        Trace trace = new Trace(2 * config.requests() + streams);
        long nextPointer = 1L << 32;
        for (int s = 0; s < streams && config.workspaceBytes() > 0; s++) {
            trace.add(999, 0, Trace.ALLOCATE, nextPointer, config.workspaceBytes(), Trace.NO_STREAM);
            nextPointer += config.workspaceBytes();
        }
        long[] busyUntil = new long[streams];
        long[] pointer = new long[streams];
        long[] bytes = new long[streams];
        for (int started = 0; started < config.requests(); started++) {
            int s = 0;
            for (int i = 1; i < streams; i++) {
                if (busyUntil[i] < busyUntil[s]) {
                    s = i;                                         // the stream that finishes first takes the next
                }
            }
            long now = busyUntil[s];
            if (pointer[s] != 0) {
                trace.add(1000 + s, now, Trace.FREE, pointer[s], bytes[s], s);
            }
            int batch = 1 + random.nextInt(config.batchMax());
            long seq = Math.clamp(Math.round(config.seqMedian() * Math.exp(config.seqSigma() * gaussian(random))),
                    1, config.seqMax());
            long tokens = batch * seq;
            bytes[s] = (tokens * config.bytesPerToken() + 255) & -256L;
            pointer[s] = nextPointer;
            nextPointer += bytes[s];
            trace.add(1000 + s, now, Trace.ALLOCATE, pointer[s], bytes[s], s);
            busyUntil[s] = now + config.fixedTokens() + tokens;
        }
        for (int s = 0; s < streams; s++) {
            if (pointer[s] != 0) {
                trace.add(1000 + s, busyUntil[s], Trace.FREE, pointer[s], bytes[s], s);
            }
        }
        return trace;
    }

    private static double gaussian(SplittableRandom random) {
        double u1 = random.nextDouble();
        double u2 = random.nextDouble();
        return Math.sqrt(-2.0 * Math.log(1.0 - u1)) * Math.cos(2.0 * Math.PI * u2);
    }
}
