package io.gpupool.model.text;

import ai.djl.huggingface.tokenizers.Encoding;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import io.gpupool.model.ModelFormatException;

import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

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
 *
 * <h2>Only the part of a text that can reach the model is tokenised</h2>
 * The library tokenises a whole text before it truncates, so a text of megabytes would cost seconds of CPU and
 * gigabytes of native memory for the same few hundred tokens. {@link #tokenPrefix} hands it the part that decides
 * them, with the same result:
 * <pre>
 *   "  The  quick\u0301  brown ... fox"
 *      |___| |_______|  |___|         a word: a run between separators (' ', \t, \n, \r, Unicode Zs) holding a
 *       1       2         3             character that survives BERT's clean-up (not a control/format/unassigned
 *                                       code point, not a combining mark), so it gives at least one token
 *   cut right after word maxLength      no token of the first maxLength can come after it: the tokens before a
 *                                       separator do not depend on what follows it, and maxLength words give at
 *                                       least maxLength tokens, more than truncation keeps
 * </pre>
 * A CJK ideograph is a word of its own, as BERT's normalizer spaces it ({@code handle_chinese_chars}), so Chinese
 * and Japanese text without spaces is cut too. The few characters that might count either way (Unicode line
 * separators, marks) count as neither, which only moves the cut later. All this holds for BERT's normalizer and
 * pre-tokenizer; a {@code tokenizer.json} with others has its texts tokenised whole. A prefix longer than
 * {@value #MAX_CHARS_PER_TOKEN} characters per token of the model (words of hundreds of characters, or megabytes of
 * blanks) is refused instead, naming the element: real text never has such words, and tokenising it would cost what
 * the cut saves.
 */
public final class TextTokenizer implements AutoCloseable {

    public static final String FILE = "tokenizer.json";

    /** Padded ids, attention mask and token types of a batch, row-major [batch, sequence]. */
    public record Batch(int batch, int sequence, long[] ids, long[] attentionMask, long[] typeIds) {
    }

    private final HuggingFaceTokenizer tokenizer;
    private final int maxLength;
    private final Path source;

    /** Whether the file splits words as BERT does, so that {@link #tokenPrefix} may cut (class comment). */
    private final boolean bertWords;
    /** Whether its normalizer makes each CJK ideograph a word of its own (BERT's handle_chinese_chars). */
    private final boolean ideographsAreWords;

    private TextTokenizer(HuggingFaceTokenizer tokenizer, int maxLength, Path source, boolean bertWords,
                          boolean ideographsAreWords) {
        this.tokenizer = tokenizer;
        this.maxLength = maxLength;
        this.source = source;
        this.bertWords = bertWords;
        this.ideographsAreWords = ideographsAreWords;
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
            // read before the native tokenizer exists, so that a failure here leaves nothing to close; the file is
            // the tokenizer library's to judge (as HuggingFace reads it), this reads only how it splits words
            JsonNode file = JsonMapper.shared().readTree(tokenizerJson.toFile());
            JsonNode normalizer = file.path("normalizer");
            boolean bertWords = normalizer.path("type").asString("").equals("BertNormalizer")
                    && file.path("pre_tokenizer").path("type").asString("").equals("BertPreTokenizer");
            HuggingFaceTokenizer tokenizer = HuggingFaceTokenizer.newInstance(tokenizerJson, Map.of(
                    "addSpecialTokens", "true", "truncation", "true", "padding", "false",
                    "maxLength", Integer.toString(maxLength)));
            return new TextTokenizer(tokenizer, maxLength, tokenizerJson, bertWords,
                    bertWords && normalizer.path("handle_chinese_chars").asBoolean(true));
        } catch (IOException | RuntimeException e) {
            throw new ModelFormatException(tokenizerJson + ": cannot be loaded as a HuggingFace tokenizer: "
                    + e.getMessage(), e);
        }
    }

    public int maxLength() {
        return maxLength;
    }

    /** Characters per token of the model that the part of a text deciding its tokens may have (class comment). */
    static final int MAX_CHARS_PER_TOKEN = 256;

    /** Encodes one text: ids, attention mask and token types of equal length. */
    public Encoding encode(String text) {
        return tokenizer.encode(tokenPrefix(text, 0));
    }

    /**
     * The part of {@code text} that decides its first {@link #maxLength()} tokens: up to the end of its
     * maxLength-th word, or all of it (class comment).
     *
     * @param element the text's place in its request, for the message
     * @throws IllegalArgumentException when that part is longer than {@value #MAX_CHARS_PER_TOKEN} x maxLength characters
     */
    String tokenPrefix(String text, int element) {
        if (!bertWords) {
            return text;                                           // words it splits otherwise: nothing is cut
        }
        long limit = (long) MAX_CHARS_PER_TOKEN * maxLength;
        int words = 0;
        boolean inWord = false;
        boolean bearing = false;
        int i = 0;
        for (; i < text.length() && i <= limit; ) {
            int c = text.codePointAt(i);
            if (ideographsAreWords && isIdeograph(c)) {
                if (inWord && bearing) {
                    words++;                                       // the word before it ends here
                }
                if (++words >= maxLength) {                        // and the ideograph is one of its own
                    return text.substring(0, i + Character.charCount(c));
                }
                inWord = false;
                bearing = false;
            } else if (isSeparator(c)) {
                if (inWord && bearing && ++words == maxLength) {
                    return text.substring(0, i);
                }
                inWord = false;
                bearing = false;
            } else {
                inWord = true;
                bearing |= makesToken(c);
            }
            i += Character.charCount(c);
        }
        if (i >= text.length() && text.length() <= limit) {
            return text;
        }
        throw new IllegalArgumentException("'text' element " + element + " has words of more than " + limit
                + " characters before its first " + maxLength + " (its length: " + text.length()
                + " characters); the model reads at most " + maxLength + " tokens, and real text has no such words");
    }

    /** The CJK ideographs BERT's normalizer puts spaces around (its {@code handle_chinese_chars}). */
    private static boolean isIdeograph(int c) {
        return c >= 0x4E00 && c <= 0x9FFF || c >= 0x3400 && c <= 0x4DBF || c >= 0x20000 && c <= 0x2A6DF
                || c >= 0x2A700 && c <= 0x2B73F || c >= 0x2B740 && c <= 0x2B81F || c >= 0x2B820 && c <= 0x2CEAF
                || c >= 0xF900 && c <= 0xFAFF || c >= 0x2F800 && c <= 0x2FA1F;
    }

    private static boolean isSeparator(int c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r' || Character.getType(c) == Character.SPACE_SEPARATOR;
    }

    /** Whether {@code c} survives BERT's clean-up and accent stripping, so its word gives at least one token. */
    private static boolean makesToken(int c) {
        return switch (Character.getType(c)) {
            case Character.CONTROL, Character.FORMAT, Character.UNASSIGNED, Character.PRIVATE_USE, Character.SURROGATE,
                 Character.NON_SPACING_MARK, Character.ENCLOSING_MARK, Character.COMBINING_SPACING_MARK,
                 Character.LINE_SEPARATOR, Character.PARAGRAPH_SEPARATOR, Character.SPACE_SEPARATOR -> false;
            default -> c != 0xFFFD;
        };
    }

    /** Encodes and pads a batch of texts (at least one). */
    public Batch encode(List<String> texts) {
        if (texts.isEmpty()) {
            throw new IllegalArgumentException("no text to tokenise");
        }
        Encoding[] encodings = new Encoding[texts.size()];
        int longest = 1;
        for (int i = 0; i < encodings.length; i++) {
            encodings[i] = tokenizer.encode(tokenPrefix(texts.get(i), i));
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
