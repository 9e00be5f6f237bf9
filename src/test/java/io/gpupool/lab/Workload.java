package io.gpupool.lab;

import tools.jackson.databind.JsonNode;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * The requests the load driver sends: well-formed v2 infer requests of variable size, and a corpus of
 * malformed ones that a correct server answers with 4xx.
 *
 * <h2>Sizes</h2>
 * BERT requests: batch uniform in [batchMin, batchMax]; sequence length drawn from a log-normal distribution
 * (median {@code seqMedian}, shape {@code seqSigma}) and clipped to [1, seqMax], which gives the long
 * right tail of real text lengths:
 * <pre>
 *   count
 *    |   ▄█▄
 *    |  ▟███▙▖
 *    | ▐██████▙▄▖▁ ▁                      seq = round(exp(ln(median) + sigma * N(0, 1)))
 *    +-----------------------------  seq
 *      1  median            seqMax
 * </pre>
 * MLP requests: batch uniform in [1, mlpBatchMax] rows of 4 features.
 *
 * <p>Bodies are generated once, up front ({@link #prepare}), and then drawn at random, so the driver
 * spends its time sending, not formatting numbers. A share of the BERT bodies ({@code binaryShare})
 * uses the binary tensor data extension (INT64 little-endian after the JSON header). BERT requests ask
 * for one small output ({@code bertOutput}, default {@code pooler_output} [batch, hidden]) so that the
 * answer's JSON does not dominate what is measured.
 */
final class Workload {

    /**
     * One request to send; {@code headerLength} is the Inference-Header-Content-Length or null;
     * {@code tokens} is batch x sequence (BERT) or batch (MLP), 0 for malformed requests.
     */
    record Request(Kind kind, String caseName, String path, byte[] body, String headerLength, String contentType,
                   long tokens) {
    }

    enum Kind { BERT, MLP, MALFORMED }

    /** What a run sends; see {@link LoadDriver} for the command-line names. */
    record Mix(String bertModel, String bertOutput, String mlpModel, double bertWeight, double mlpWeight, int batchMin, int batchMax,
               int seqMin, double seqMedian, double seqSigma, int seqMax, int vocab, int mlpBatchMax, double binaryShare,
               double malformedShare) {

        Mix {
            if (bertWeight < 0 || mlpWeight < 0 || bertWeight + mlpWeight <= 0) {
                throw new IllegalArgumentException("--mix needs a positive weight for bert or mlp, got bert="
                        + bertWeight + " mlp=" + mlpWeight);
            }
            requireAtLeastOne("--batch-min", batchMin);
            requireAtLeastOne("--batch-max", batchMax);
            if (batchMax < batchMin) {
                throw new IllegalArgumentException("--batch-max (" + batchMax + ") must be >= --batch-min (" + batchMin + ")");
            }
            requireAtLeastOne("--seq-min", seqMin);
            requireAtLeastOne("--seq-max", seqMax);
            if (seqMax < seqMin) {
                throw new IllegalArgumentException("--seq-max (" + seqMax + ") must be >= --seq-min (" + seqMin + ")");
            }
            if (vocab < 2) {
                throw new IllegalArgumentException("--vocab must be >= 2, got " + vocab);
            }
            requireAtLeastOne("--mlp-batch-max", mlpBatchMax);
            if (!(seqMedian >= 1)) {
                throw new IllegalArgumentException("--seq-median must be >= 1, got " + seqMedian);
            }
            if (!(seqSigma >= 0 && seqSigma <= 3)) {
                throw new IllegalArgumentException("--seq-sigma must be in [0, 3], got " + seqSigma);
            }
            requireShare("--binary", binaryShare);
            requireShare("--malformed", malformedShare);
        }

        private static void requireAtLeastOne(String option, int value) {
            if (value < 1) {
                throw new IllegalArgumentException(option + " must be >= 1, got " + value);
            }
        }

        private static void requireShare(String option, double value) {
            if (!(value >= 0 && value <= 1)) {
                throw new IllegalArgumentException(option + " must be in [0, 1], got " + value);
            }
        }
    }

    private final Mix mix;
    private final List<Request> bert = new ArrayList<>();
    private final List<Request> mlp = new ArrayList<>();
    private final List<Request> malformed;

    private Workload(Mix mix, List<Request> malformed) {
        this.mix = mix;
        this.malformed = malformed;
    }

    /** Generates {@code variants} distinct well-formed bodies per model (those with weight > 0) and the corpus. */
    static Workload prepare(Mix mix, int variants, long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        Workload workload = new Workload(mix, mix.malformedShare() > 0 ? malformedCorpus(mix) : List.of());
        for (int i = 0; i < variants; i++) {
            if (mix.bertWeight() > 0) {
                int batch = mix.batchMin() + random.nextInt(mix.batchMax() - mix.batchMin() + 1);
                int seq = sequenceLength(random, mix);
                boolean binary = random.nextDouble() < mix.binaryShare();
                workload.bert.add(binary ? bertBinary(mix.bertModel(), random, batch, seq, mix.vocab(), mix.bertOutput())
                        : bertJson(mix.bertModel(), random, batch, seq, mix.vocab(), mix.bertOutput()));
            }
            if (mix.mlpWeight() > 0) {
                workload.mlp.add(mlpJson(mix.mlpModel(), random, 1 + random.nextInt(mix.mlpBatchMax())));
            }
        }
        return workload;
    }

    /**
     * Bodies for any model from its metadata ({@code GET /v2/models/{model}}), instead of the BERT/MLP
     * mix: every input is filled; a -1 in first place is the batch (uniform in [1, batchMax]), a -1 in
     * second place the sequence length (the log-normal above, clipped to [seqMin, seqMax]); fixed
     * dimensions are kept. Integer inputs get token ids in [1, vocab) ({@code 1} for names containing
     * "mask", {@code 0} for names containing "type"); floating-point inputs get standard normal values.
     */
    static Workload fromMetadata(Mix mix, String model, JsonNode metadata, int variants, long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        Workload workload = new Workload(new Mix(model, mix.bertOutput(), model, 1, 0, mix.batchMin(), mix.batchMax(), mix.seqMin(), mix.seqMedian(),
                mix.seqSigma(), mix.seqMax(), mix.vocab(), 1, 0, mix.malformedShare()),
                mix.malformedShare() > 0 ? malformedCorpus(mix) : List.of());
        for (int i = 0; i < variants; i++) {
            long[] tokens = new long[1];
            byte[] body = metadataPayload(metadata, mix, random, tokens);
            workload.bert.add(new Request(Kind.BERT, model, inferPath(model), body, null, "application/json", tokens[0]));
        }
        return workload;
    }

    /** One body for the inputs {@code metadata} declares (see {@link #fromMetadata}); tokensOut[0] = batch x sequence. */
    static byte[] metadataPayload(JsonNode metadata, Mix mix, SplittableRandom random, long[] tokensOut) {
        int batch = mix.batchMin() + random.nextInt(mix.batchMax() - mix.batchMin() + 1);
        int seq = sequenceLength(random, mix);
        tokensOut[0] = batch;
        StringBuilder body = new StringBuilder("{\"inputs\":[");
        boolean firstInput = true;
        for (JsonNode input : metadata.path("inputs")) {
            String name = input.path("name").asString("");
            String datatype = input.path("datatype").asString("");
            JsonNode shape = input.path("shape");
            long[] dims = new long[shape.size()];
            long count = 1;
            for (int d = 0; d < dims.length; d++) {
                long dim = shape.get(d).asLong();
                dims[d] = dim >= 0 ? dim : d == 0 ? batch : d == 1 ? seq : 1;
                count *= dims[d];
            }
            if (dims.length > 1 && shape.get(1).asLong() < 0) {
                tokensOut[0] = (long) batch * seq;
            }
            body.append(firstInput ? "" : ",").append("{\"name\":\"").append(name).append("\",\"datatype\":\"")
                    .append(datatype).append("\",\"shape\":[");
            firstInput = false;
            for (int d = 0; d < dims.length; d++) {
                body.append(d == 0 ? "" : ",").append(dims[d]);
            }
            body.append("],\"data\":[");
            boolean floating = datatype.startsWith("FP") || datatype.startsWith("BF");
            String lower = name.toLowerCase(Locale.ROOT);
            for (long i = 0; i < count; i++) {
                body.append(i == 0 ? "" : ",");
                if (floating) {
                    body.append(String.format(Locale.ROOT, "%.3f", gaussian(random)));
                } else if (lower.contains("mask")) {
                    body.append(1);
                } else if (lower.contains("type")) {
                    body.append(0);
                } else {
                    body.append(1 + random.nextInt(mix.vocab() - 1));
                }
            }
            body.append("]}");
        }
        return body.append("]}").toString().getBytes(StandardCharsets.UTF_8);
    }

    /** Draws the next request: malformed with {@code malformedShare}, else BERT or MLP by weight. */
    Request next(SplittableRandom random) {
        if (!malformed.isEmpty() && random.nextDouble() < mix.malformedShare()) {
            return malformed.get(random.nextInt(malformed.size()));
        }
        double bertShare = mix.bertWeight() / (mix.bertWeight() + mix.mlpWeight());
        List<Request> pool = random.nextDouble() < bertShare ? bert : mlp;
        return pool.get(random.nextInt(pool.size()));
    }

    List<Request> malformedCases() {
        return malformed;
    }

    static int sequenceLength(SplittableRandom random, Mix mix) {
        double gaussian = gaussian(random);
        long seq = Math.round(Math.exp(Math.log(mix.seqMedian()) + mix.seqSigma() * gaussian));
        return (int) Math.clamp(seq, mix.seqMin(), mix.seqMax());
    }

    /** Standard normal by Box-Muller (SplittableRandom has no nextGaussian of its own state). */
    private static double gaussian(SplittableRandom random) {
        double u1 = 1.0 - random.nextDouble(); // (0, 1]
        double u2 = random.nextDouble();
        return Math.sqrt(-2.0 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
    }

    private static String inferPath(String model) {
        return "/v2/models/" + model + "/infer";
    }

    static Request bertJson(String model, SplittableRandom random, int batch, int seq, int vocab, String output) {
        StringBuilder ids = new StringBuilder(batch * seq * 3);
        StringBuilder mask = new StringBuilder(batch * seq * 2);
        for (int b = 0; b < batch; b++) {
            int length = 1 + random.nextInt(seq); // tokens before padding in this row
            for (int s = 0; s < seq; s++) {
                String sep = (b == 0 && s == 0) ? "" : ",";
                ids.append(sep).append(s < length ? 1 + random.nextInt(vocab - 1) : 0);
                mask.append(sep).append(s < length ? 1 : 0);
            }
        }
        String body = """
                {"id":"load-%d-%d","inputs":[\
                {"name":"input_ids","shape":[%d,%d],"datatype":"INT64","data":[%s]},\
                {"name":"attention_mask","shape":[%d,%d],"datatype":"INT64","data":[%s]}],\
                "outputs":[{"name":"%s"}]}"""
                .formatted(batch, seq, batch, seq, ids, batch, seq, mask, output);
        return new Request(Kind.BERT, "bert b" + batch + " s" + seq, inferPath(model),
                body.getBytes(StandardCharsets.UTF_8), null, "application/json", (long) batch * seq);
    }

    static Request bertBinary(String model, SplittableRandom random, int batch, int seq, int vocab, String output) {
        int n = batch * seq;
        String header = """
                {"inputs":[{"name":"input_ids","shape":[%d,%d],"datatype":"INT64","parameters":{"binary_data_size":%d}}],\
                "outputs":[{"name":"%s","parameters":{"binary_data":true}}]}"""
                .formatted(batch, seq, 8L * n, output);
        byte[] json = header.getBytes(StandardCharsets.UTF_8);
        ByteBuffer body = ByteBuffer.allocate(json.length + 8 * n).order(ByteOrder.LITTLE_ENDIAN);
        body.put(json);
        for (int i = 0; i < n; i++) {
            body.putLong(1 + random.nextInt(vocab - 1));
        }
        return new Request(Kind.BERT, "bert-binary b" + batch + " s" + seq, inferPath(model), body.array(),
                Integer.toString(json.length), "application/octet-stream", n);
    }

    static Request mlpJson(String model, SplittableRandom random, int batch) {
        StringBuilder data = new StringBuilder(batch * 4 * 5);
        for (int i = 0; i < batch * 4; i++) {
            data.append(i == 0 ? "" : ",").append(String.format(Locale.ROOT, "%.2f", 0.1 + 7 * random.nextDouble()));
        }
        String body = """
                {"inputs":[{"name":"input","shape":[%d,4],"datatype":"FP32","data":[%s]}]}""".formatted(batch, data);
        return new Request(Kind.MLP, "mlp b" + batch, inferPath(model), body.getBytes(StandardCharsets.UTF_8), null,
                "application/json", batch);
    }

    /**
     * Requests a correct server refuses with 400, 404 or 413, never 5xx: broken JSON, shapes that do
     * not match their data, wrong and unknown datatypes, huge, zero and negative dimensions, strings
     * where numbers belong, binary headers that lie, unknown inputs and models, path tricks.
     */
    static List<Request> malformedCorpus(Mix mix) {
        String bert = mix.bertModel();
        String mlp = mix.mlpModel();
        List<Request> corpus = new ArrayList<>();
        String good = """
                {"inputs":[{"name":"input","shape":[2,4],"datatype":"FP32","data":[5.1,3.5,1.4,0.2,6.7,3.0,5.2,2.3]}]}""";
        json(corpus, "truncated JSON", mlp, good.substring(0, good.length() / 2));
        json(corpus, "truncated after last value", mlp, good.substring(0, good.length() - 3));
        json(corpus, "empty body", mlp, "");
        json(corpus, "not JSON", mlp, "inputs=please");
        json(corpus, "JSON array instead of object", mlp, "[1,2,3]");
        json(corpus, "no inputs", mlp, "{\"inputs\":[]}");
        json(corpus, "inputs not a list", mlp, "{\"inputs\":{\"name\":\"input\"}}");
        json(corpus, "shape does not match data", mlp, mlpBody("[2,4]", "FP32", "[1,2,3,4,5,6,7]"));
        json(corpus, "too much data", mlp, mlpBody("[1,4]", "FP32", "[1,2,3,4,5]"));
        json(corpus, "wrong rank", mlp, mlpBody("[8]", "FP32", "[1,2,3,4,5,6,7,8]"));
        json(corpus, "wrong feature count", mlp, mlpBody("[2,3]", "FP32", "[1,2,3,4,5,6]"));
        json(corpus, "wrong dtype INT64 for FP32", mlp, mlpBody("[1,4]", "INT64", "[1,2,3,4]"));
        json(corpus, "unknown dtype", mlp, mlpBody("[1,4]", "FP128", "[1,2,3,4]"));
        json(corpus, "dtype missing", mlp, "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"data\":[1,2,3,4]}]}");
        json(corpus, "shape missing", mlp, "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"data\":[1,2,3,4]}]}");
        json(corpus, "huge dimensions", mlp, mlpBody("[2147483647,4]", "FP32", "[1,2,3,4]"));
        json(corpus, "dimension product overflows", mlp, mlpBody("[4611686018427387904,4]", "FP32", "[1,2,3,4]"));
        json(corpus, "dimension beyond long", mlp, mlpBody("[99999999999999999999999,4]", "FP32", "[1,2,3,4]"));
        json(corpus, "negative dimension", mlp, mlpBody("[-1,4]", "FP32", "[1,2,3,4]"));
        json(corpus, "zero batch", mlp, mlpBody("[0,4]", "FP32", "[]"));
        json(corpus, "fractional dimension", mlp, mlpBody("[1.5,4]", "FP32", "[1,2,3,4]"));
        json(corpus, "strings in numeric data", mlp, mlpBody("[1,4]", "FP32", "[\"a\",\"b\",\"c\",\"d\"]"));
        json(corpus, "null in numeric data", mlp, mlpBody("[1,4]", "FP32", "[1,null,3,4]"));
        json(corpus, "objects in numeric data", mlp, mlpBody("[1,4]", "FP32", "[{},{},{},{}]"));
        json(corpus, "ragged nested data", mlp, mlpBody("[2,4]", "FP32", "[[1,2,3,4],[5,6,7]]"));
        json(corpus, "deeply nested data", mlp, mlpBody("[1,4]", "FP32", "[".repeat(2000) + "1" + "]".repeat(2000)));
        json(corpus, "number beyond double", mlp, mlpBody("[1,4]", "FP32", "[1e999,2,3,4]"));
        json(corpus, "unknown input name", mlp, "{\"inputs\":[{\"name\":\"pixels\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4]}]}");
        json(corpus, "input given twice", mlp, "{\"inputs\":["
                + "{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4]},"
                + "{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4]}]}");
        json(corpus, "unknown output", mlp, "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\","
                + "\"data\":[1,2,3,4]}],\"outputs\":[{\"name\":\"secrets\"}]}");
        json(corpus, "batch over the model's maximum", mlp, mlpBody("[100000,4]", "FP32", "[1,2,3,4]"));
        json(corpus, "negative timeout", mlp, "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\","
                + "\"data\":[1,2,3,4]}],\"parameters\":{\"timeout\":-5}}");
        json(corpus, "BERT wrong dtype FP32 ids", bert, "{\"inputs\":[{\"name\":\"input_ids\",\"shape\":[1,3],"
                + "\"datatype\":\"FP32\",\"data\":[1,2,3]}]}");
        json(corpus, "BERT sequence over maximum", bert, "{\"inputs\":[{\"name\":\"input_ids\",\"shape\":[1,100000],"
                + "\"datatype\":\"INT64\",\"data\":[1]}]}");
        json(corpus, "BERT mask shape differs", bert, "{\"inputs\":["
                + "{\"name\":\"input_ids\",\"shape\":[1,3],\"datatype\":\"INT64\",\"data\":[1,2,3]},"
                + "{\"name\":\"attention_mask\",\"shape\":[1,2],\"datatype\":\"INT64\",\"data\":[1,1]}]}");
        json(corpus, "BERT token id out of vocabulary", bert, "{\"inputs\":[{\"name\":\"input_ids\",\"shape\":[1,3],"
                + "\"datatype\":\"INT64\",\"data\":[1,2,99999999]}]}");
        json(corpus, "BERT negative token id", bert, "{\"inputs\":[{\"name\":\"input_ids\",\"shape\":[1,3],"
                + "\"datatype\":\"INT64\",\"data\":[1,-2,3]}]}");
        json(corpus, "unknown model", "no-such-model", good);
        json(corpus, "model name path trick", "..%2F..%2Fetc%2Fpasswd", good);

        // The binary extension: headers and sizes that do not add up.
        String binHeader = "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\","
                + "\"parameters\":{\"binary_data_size\":16}}]}";
        byte[] header = binHeader.getBytes(StandardCharsets.UTF_8);
        byte[] sixteen = new byte[16];
        binary(corpus, "binary header length past the body", mlp, concat(header, sixteen), String.valueOf(header.length + 100));
        binary(corpus, "binary header length negative", mlp, concat(header, sixteen), "-7");
        binary(corpus, "binary header length not a number", mlp, concat(header, sixteen), "twelve");
        binary(corpus, "binary header length cuts the JSON", mlp, concat(header, sixteen), String.valueOf(header.length - 5));
        binary(corpus, "binary data shorter than declared", mlp, concat(header, new byte[9]), String.valueOf(header.length));
        binary(corpus, "binary data longer than declared", mlp, concat(header, new byte[40]), String.valueOf(header.length));
        binary(corpus, "binary size disagrees with shape", mlp,
                concat(("{\"inputs\":[{\"name\":\"input\",\"shape\":[2,4],\"datatype\":\"FP32\","
                        + "\"parameters\":{\"binary_data_size\":16}}]}").getBytes(StandardCharsets.UTF_8), sixteen),
                String.valueOf(("{\"inputs\":[{\"name\":\"input\",\"shape\":[2,4],\"datatype\":\"FP32\","
                        + "\"parameters\":{\"binary_data_size\":16}}]}").length()));
        binary(corpus, "binary size negative", mlp,
                concat(("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\","
                        + "\"parameters\":{\"binary_data_size\":-16}}]}").getBytes(StandardCharsets.UTF_8), sixteen),
                String.valueOf(("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\","
                        + "\"parameters\":{\"binary_data_size\":-16}}]}").length()));
        binary(corpus, "binary size huge", mlp,
                concat(("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\","
                        + "\"parameters\":{\"binary_data_size\":9223372036854775807}}]}").getBytes(StandardCharsets.UTF_8), sixteen),
                String.valueOf(("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\","
                        + "\"parameters\":{\"binary_data_size\":9223372036854775807}}]}").length()));
        return List.copyOf(corpus);
    }

    private static String mlpBody(String shape, String dtype, String data) {
        return "{\"inputs\":[{\"name\":\"input\",\"shape\":" + shape + ",\"datatype\":\"" + dtype + "\",\"data\":"
                + data + "}]}";
    }

    private static void json(List<Request> corpus, String name, String model, String body) {
        corpus.add(new Request(Kind.MALFORMED, name, inferPath(model), body.getBytes(StandardCharsets.UTF_8), null,
                "application/json", 0));
    }

    private static void binary(List<Request> corpus, String name, String model, byte[] body, String headerLength) {
        corpus.add(new Request(Kind.MALFORMED, name, inferPath(model), body, headerLength, "application/octet-stream", 0));
    }

    private static byte[] concat(byte[] a, byte[] b) {
        byte[] result = new byte[a.length + b.length];
        System.arraycopy(a, 0, result, 0, a.length);
        System.arraycopy(b, 0, result, a.length, b.length);
        return result;
    }
}
