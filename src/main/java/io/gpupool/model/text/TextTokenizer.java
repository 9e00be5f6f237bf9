package io.gpupool.model.text;

import ai.djl.huggingface.tokenizers.Encoding;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import io.gpupool.model.ModelFormatException;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * A model folder's {@code tokenizer.json}, run by HuggingFace's own tokenizers library (Rust) through
 * DJL's binding, so that the tokens are those transformers' fast tokenizer gives for the same file.
 *
 * <p>Texts are encoded one by one with the file's special tokens ({@code [CLS] ... [SEP]} for BERT),
 * truncated to the model's longest sequence (the last token stays {@code [SEP]}), then padded on the
 * right to the longest in the batch with id 0 and attention 0, as transformers pads a batch. The pad
 * id does not change a result: attention never reaches a padded position.
 *
 * <p>The binding's native library ships inside its jar (linux-x86_64 among others). It is extracted
 * into a private temporary folder and loaded from there; DJL's offline mode is set first, so the
 * binding never looks for a CUDA build to download (a GPU host would otherwise make it try).
 * Encoding is thread-safe.
 */
public final class TextTokenizer implements AutoCloseable {

    public static final String FILE = "tokenizer.json";

    /** Padded ids, attention mask and token types of a batch, row-major [batch, sequence]. */
    public record Batch(int batch, int sequence, long[] ids, long[] attentionMask, long[] typeIds) {
    }

    private final HuggingFaceTokenizer tokenizer;
    private final int maxLength;
    private final Path source;

    private TextTokenizer(HuggingFaceTokenizer tokenizer, int maxLength, Path source) {
        this.tokenizer = tokenizer;
        this.maxLength = maxLength;
        this.source = source;
    }

    /**
     * Loads {@code tokenizerJson}; sequences are cut to {@code maxLength} tokens.
     *
     * @throws ModelFormatException naming the file when it cannot be read or parsed
     */
    public static TextTokenizer load(Path tokenizerJson, int maxLength) {
        if (!Files.isRegularFile(tokenizerJson)) {
            throw new ModelFormatException(tokenizerJson + ": no such file");
        }
        NativeLibrary.prepare();
        try {
            HuggingFaceTokenizer tokenizer = HuggingFaceTokenizer.newInstance(tokenizerJson, Map.of(
                    "addSpecialTokens", "true", "truncation", "true", "padding", "false",
                    "maxLength", Integer.toString(maxLength)));
            return new TextTokenizer(tokenizer, maxLength, tokenizerJson);
        } catch (IOException | RuntimeException e) {
            throw new ModelFormatException(tokenizerJson + ": cannot be loaded as a HuggingFace tokenizer: "
                    + e.getMessage(), e);
        }
    }

    public int maxLength() {
        return maxLength;
    }

    /** Encodes one text: ids, attention mask and token types of equal length. */
    public Encoding encode(String text) {
        return tokenizer.encode(text);
    }

    /** Encodes and pads a batch of texts (at least one). */
    public Batch encode(List<String> texts) {
        if (texts.isEmpty()) {
            throw new IllegalArgumentException("no text to tokenise");
        }
        Encoding[] encodings = new Encoding[texts.size()];
        int longest = 1;
        for (int i = 0; i < encodings.length; i++) {
            encodings[i] = tokenizer.encode(texts.get(i));
            longest = Math.max(longest, encodings[i].getIds().length);
        }
        int batch = encodings.length;
        long[] ids = new long[batch * longest];
        long[] mask = new long[batch * longest];
        long[] types = new long[batch * longest];
        for (int row = 0; row < batch; row++) {
            long[] rowIds = encodings[row].getIds();
            System.arraycopy(rowIds, 0, ids, row * longest, rowIds.length);
            System.arraycopy(encodings[row].getAttentionMask(), 0, mask, row * longest, rowIds.length);
            System.arraycopy(encodings[row].getTypeIds(), 0, types, row * longest, rowIds.length);
        }
        return new Batch(batch, longest, ids, mask, types);
    }

    @Override
    public void close() {
        tokenizer.close();
    }

    @Override
    public String toString() {
        return "TextTokenizer[" + source + ", max " + maxLength + " tokens]";
    }

    /** Where and how DJL loads the tokenizers library; settled once, before its first use. */
    static final class NativeLibrary {

        private static boolean prepared;

        private NativeLibrary() {
        }

        static synchronized void prepare() {
            if (prepared) {
                return;
            }
            // Offline mode makes the binding take the CPU build its jar carries, never a CUDA build
            // from the network; an operator's own DJL settings (environment or -D) are kept.
            setUnlessGiven("ai.djl.offline", "DJL_OFFLINE", "true");
            if (System.getenv("ENGINE_CACHE_DIR") == null && System.getProperty("ENGINE_CACHE_DIR") == null
                    && System.getenv("DJL_CACHE_DIR") == null && System.getProperty("DJL_CACHE_DIR") == null) {
                try {
                    // A folder only this process can write: the library is loaded from where it is extracted.
                    Path folder = Files.createTempDirectory("gpupool-tokenizers-");
                    System.setProperty("ENGINE_CACHE_DIR", folder.toString());
                } catch (IOException e) {
                    throw new ModelFormatException("cannot create a folder for the tokenizers library: "
                            + e.getMessage(), e);
                }
            }
            prepared = true;
        }

        private static void setUnlessGiven(String property, String environment, String value) {
            if (System.getProperty(property) == null && System.getenv(environment) == null) {
                System.setProperty(property, value);
            }
        }
    }
}
