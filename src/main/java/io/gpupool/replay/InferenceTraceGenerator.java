package io.gpupool.replay;

import io.gpupool.memory.trace.Trace;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * Generates the allocation trace of a BERT-style encoder serving variable-size requests on many
 * streams at once: the workload the pool's fragmentation target is stated for.
 *
 * <h2>The model (BERT-base shapes by default)</h2>
 * <pre>
 *   B = batch, S = sequence length, H = hidden (768), A = heads (12), I = intermediate (3072),
 *   e = bytes per element (4)
 *
 *   request start : ids, token types, mask   B*S*8 each        live for the whole request
 *   embeddings    : x0                       B*S*H*e
 *   layer l = 1..L (12):
 *     q, k, v            B*S*H*e each     (read x)
 *     scores = q k^T     B*A*S*S*e        free q, k
 *     probs = softmax    B*A*S*S*e        free scores
 *     ctx = probs v      B*S*H*e          free probs, v
 *     attn = ctx W_o     B*S*H*e          free ctx
 *     y = LN(attn + x)   B*S*H*e          free attn, x
 *     inter = y W_1      B*S*I*e
 *     act = gelu(inter)  B*S*I*e          free inter
 *     out = act W_2      B*S*H*e          free act
 *     x' = LN(out + y)   B*S*H*e          free out, y
 *   head          : pooled B*H*e, logits B*2*e; then everything left is freed
 * </pre>
 * Each tensor is allocated in forward order and freed right after its last use, the way a
 * liveness-planned executor does it.
 *
 * <h2>Requests and interleaving</h2>
 * <ol>
 *   <li>S is lognormal (median {@code seqMedian}, log-σ {@code seqSigma}) clamped to
 *       [{@code seqMin}, {@code seqMax}]; B is uniform in [1, {@code batchMax}].</li>
 *   <li>{@code streams} streams each run requests back to back; each request is a list of steps
 *       (one line of the table above: its allocations, then its frees).</li>
 *   <li>The next step to run is taken from a uniformly random busy stream, so the steps of
 *       concurrent requests interleave the way concurrent streams do. Pointers are synthetic
 *       (unique while live); times advance by one microsecond per event.</li>
 * </ol>
 * The same seed gives the same trace.
 */
public final class InferenceTraceGenerator {

    /** Generator parameters; {@link #bertBase()} gives the defaults. */
    public record Config(int requests, int streams, long seed, int hidden, int heads, int intermediate, int layers,
                         int elementBytes, int batchMax, int seqMin, int seqMax, double seqMedian, double seqSigma) {
        public Config {
            positive("requests", requests);
            positive("streams", streams);
            positive("hidden", hidden);
            positive("heads", heads);
            positive("intermediate", intermediate);
            positive("layers", layers);
            positive("elementBytes", elementBytes);
            positive("batchMax", batchMax);
            positive("seqMin", seqMin);
            if (seqMax < seqMin) {
                throw new IllegalArgumentException("seqMax must be >= seqMin (" + seqMin + "), got " + seqMax);
            }
            if (!(seqMedian > 0) || !(seqSigma >= 0)) {
                throw new IllegalArgumentException("seqMedian must be > 0 and seqSigma >= 0, got " + seqMedian
                        + " and " + seqSigma);
            }
        }

        private static void positive(String field, long value) {
            if (value <= 0) {
                throw new IllegalArgumentException(field + " must be positive, got " + value);
            }
        }

        /** BERT-base, fp32, batch 1–32, sequence 16–512 with median 128, 16 streams, 2000 requests. */
        public static Config bertBase() {
            return new Config(2000, 16, 42, 768, 12, 3072, 12, 4, 32, 16, 512, 128, 0.7);
        }

        public Config withRequests(int n) {
            return new Config(n, streams, seed, hidden, heads, intermediate, layers, elementBytes, batchMax, seqMin,
                    seqMax, seqMedian, seqSigma);
        }

        public Config withStreams(int n) {
            return new Config(requests, n, seed, hidden, heads, intermediate, layers, elementBytes, batchMax, seqMin,
                    seqMax, seqMedian, seqSigma);
        }

        public Config withSeed(long s) {
            return new Config(requests, streams, s, hidden, heads, intermediate, layers, elementBytes, batchMax, seqMin,
                    seqMax, seqMedian, seqSigma);
        }
    }

    /** One step: tensors to allocate (sizes in bytes), then tensor slots to free. */
    private record Step(long[] allocate, int[] allocateSlot, int[] free) {
    }

    private final Config config;

    public InferenceTraceGenerator(Config config) {
        this.config = config;
    }

    public Trace generate() {
        SplittableRandom random = new SplittableRandom(config.seed());
        int streams = config.streams();
        List<Step>[] program = newPrograms(streams);
        int[] position = new int[streams];
        long[][] slotPointer = new long[streams][];
        long[][] slotBytes = new long[streams][];
        int started = 0;
        int[] busy = new int[streams];
        int busyCount = 0;
        for (int s = 0; s < streams && started < config.requests(); s++, started++) {
            program[s] = request(random);
            busy[busyCount++] = s;
        }
        Trace trace = new Trace(config.requests() * 16 * config.layers() + 16);
        long nextPointer = 1L << 32;
        long time = 0;
        while (busyCount > 0) {
            int pick = random.nextInt(busyCount);
            int s = busy[pick];
            List<Step> steps = program[s];
            Step step = steps.get(position[s]++);
            if (slotPointer[s] == null) {
                slotPointer[s] = new long[64];
                slotBytes[s] = new long[64];
            }
            for (int i = 0; i < step.allocate().length; i++) {
                long bytes = step.allocate()[i];
                long pointer = nextPointer;
                nextPointer += (bytes + 255) & -256L;
                slotPointer[s][step.allocateSlot()[i]] = pointer;
                slotBytes[s][step.allocateSlot()[i]] = bytes;
                trace.add(1000 + s, time++ * 1000, Trace.ALLOCATE, pointer, bytes, s);
            }
            for (int slot : step.free()) {
                trace.add(1000 + s, time++ * 1000, Trace.FREE, slotPointer[s][slot], slotBytes[s][slot], s);
            }
            if (position[s] == steps.size()) { // request finished: start the next one or retire the stream
                position[s] = 0;
                if (started < config.requests()) {
                    program[s] = request(random);
                    started++;
                } else {
                    busy[pick] = busy[--busyCount];
                }
            }
        }
        return trace;
    }

    @SuppressWarnings("unchecked")
    private static List<Step>[] newPrograms(int streams) {
        return new List[streams];
    }

    /** The steps of one request with a random batch and sequence length. */
    private List<Step> request(SplittableRandom random) {
        int batch = 1 + random.nextInt(config.batchMax());
        double gaussian = gaussian(random);
        long seq = Math.round(config.seqMedian() * Math.exp(config.seqSigma() * gaussian));
        seq = Math.max(config.seqMin(), Math.min(config.seqMax(), seq));
        return steps(batch, seq);
    }

    private static double gaussian(SplittableRandom random) {
        double u1 = random.nextDouble();
        double u2 = random.nextDouble();
        return Math.sqrt(-2.0 * Math.log(1.0 - u1)) * Math.cos(2.0 * Math.PI * u2);
    }

    /** Slot numbers name tensors within one request; each slot is reused once its tensor is freed. */
    List<Step> steps(long batch, long seq) {
        long e = config.elementBytes();
        long tokens = batch * seq;
        long hidden = tokens * config.hidden() * e;
        long inter = tokens * config.intermediate() * e;
        long scores = batch * config.heads() * seq * seq * e;
        final int ids = 0, types = 1, mask = 2, x = 3, q = 4, k = 5, v = 6, sc = 7, pr = 8, ctx = 9, attn = 10,
                y = 11, in = 12, act = 13, out = 14, pooled = 15, logits = 16;
        List<Step> steps = new ArrayList<>(4 + config.layers() * 9);
        steps.add(step(new long[]{tokens * 8, tokens * 8, tokens * 8}, new int[]{ids, types, mask}, new int[0]));
        steps.add(step(new long[]{hidden}, new int[]{x}, new int[0]));
        for (int l = 0; l < config.layers(); l++) {
            steps.add(step(new long[]{hidden, hidden, hidden}, new int[]{q, k, v}, new int[0]));
            steps.add(step(new long[]{scores}, new int[]{sc}, new int[]{q, k}));
            steps.add(step(new long[]{scores}, new int[]{pr}, new int[]{sc}));
            steps.add(step(new long[]{hidden}, new int[]{ctx}, new int[]{pr, v}));
            steps.add(step(new long[]{hidden}, new int[]{attn}, new int[]{ctx}));
            steps.add(step(new long[]{hidden}, new int[]{y}, new int[]{attn, x}));
            steps.add(step(new long[]{inter}, new int[]{in}, new int[0]));
            steps.add(step(new long[]{inter}, new int[]{act}, new int[]{in}));
            steps.add(step(new long[]{hidden}, new int[]{out}, new int[]{act}));
            // x' reuses slot x, which was freed above
            steps.add(step(new long[]{hidden}, new int[]{x}, new int[]{out, y}));
        }
        steps.add(step(new long[]{batch * config.hidden() * e}, new int[]{pooled}, new int[0]));
        steps.add(step(new long[]{batch * 2 * e}, new int[]{logits}, new int[]{pooled, x}));
        steps.add(step(new long[0], new int[0], new int[]{logits, ids, types, mask}));
        return steps;
    }

    private static Step step(long[] allocate, int[] slots, int[] free) {
        return new Step(allocate, slots, free);
    }
}
