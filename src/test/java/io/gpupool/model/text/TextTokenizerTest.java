package io.gpupool.model.text;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import io.gpupool.model.ModelFormatException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The shipped tiny-bert tokenizer gives transformers' tokens: the fixture
 * {@code fixtures/tiny-bert/tokens.json} was made by {@code tools/fixtures/make_fixtures.py} with
 * transformers' fast BERT tokenizer on the same vocabulary.
 */
class TextTokenizerTest {

    private static final Path SHIPPED = Path.of("models/tiny-bert/tokenizer.json");
    private static final Path FIXTURE = Path.of("src/test/resources/fixtures/tiny-bert/tokens.json");

    private static TextTokenizer tokenizer;
    private static JsonNode fixture;

    @BeforeAll
    static void load() throws IOException {
        fixture = JsonMapper.builder().build().readTree(Files.readString(FIXTURE));
        tokenizer = TextTokenizer.load(SHIPPED, fixture.get("max_length").intValue());
    }

    @AfterAll
    static void close() {
        tokenizer.close();
    }

    @Test
    void tokensEqualTransformersOnEveryFixtureText() {
        int compared = 0;
        for (JsonNode c : fixture.get("cases")) {
            String text = c.get("text").stringValue();
            long[] ours = tokenizer.encode(text).getIds();
            if (c.has("input_ids")) {
                assertThat(ours).as("ids of %s", text).containsExactly(longs(c.get("input_ids")));
                if (c.has("attention_mask")) {
                    assertThat(tokenizer.encode(text).getAttentionMask()).containsExactly(longs(c.get("attention_mask")));
                    assertThat(tokenizer.encode(text).getTypeIds()).containsExactly(longs(c.get("token_type_ids")));
                }
            } else {
                long[] prefix = longs(c.get("input_ids_prefix"));
                assertThat(Arrays.copyOf(ours, Math.min(ours.length, prefix.length)))
                        .as("first %d ids of %s", prefix.length, text).containsExactly(prefix);
            }
            compared++;
        }
        assertThat(compared).isEqualTo(11);
    }

    @Test
    void aLongTextIsCutToTheModelsLengthAndEndsWithSep() {
        long[] ids = tokenizer.encode(" hello world".repeat(40)).getIds();
        assertThat(ids).hasSize(64);
        assertThat(ids[0]).isEqualTo(2);   // [CLS]
        assertThat(ids[63]).isEqualTo(3);  // [SEP]
    }

    /**
     * Texts far longer than the model reads, with what BERT's clean-up drops or splits on (accents, zero-width and
     * control characters, no-break and ideographic spaces, line separators, CJK, punctuation runs, emoji): the tokens
     * of the part handed to the library are exactly those the library gives for the whole text.
     */
    @Test
    void onlyThePartThatDecidesTheTokensIsTokenisedWithTheLibrarysOwnResult() throws Exception {
        List<String> texts = List.of(
                " hello world".repeat(500),
                "Caf\u00e9 cafe\u0301 \u200b\u200b na\u00efve \u0000 \t\n\r".repeat(200),
                "\u00a0a\u3000b\u2028c\u2029d\u0085e ".repeat(300),
                "\u4e16\u754c\u4f60\u597d".repeat(400),
                "\u4e16\u754c\u4f60\u597d".repeat(5000),         // longer than the limit, without a space
                "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059\u3002".repeat(3000),
                "abc\u4e16def\u754c".repeat(2000),
                "a,b.c!d?e;".repeat(300),
                "\ud83d\ude00 \ufffd \ue000 x ".repeat(300),
                "\u0301\u0301 \u200b " + "word ".repeat(200),
                "short text");
        try (HuggingFaceTokenizer library = HuggingFaceTokenizer.newInstance(SHIPPED, Map.of(
                "addSpecialTokens", "true", "truncation", "true", "padding", "false",
                "maxLength", Integer.toString(tokenizer.maxLength())))) {
            for (String text : texts) {
                String part = tokenizer.tokenPrefix(text, 0);
                assertThat(text).startsWith(part);
                assertThat(tokenizer.encode(text).getIds()).as("ids of %s...", text.substring(0, Math.min(20, text.length())))
                        .containsExactly(library.encode(text).getIds());
            }
        }
        assertThat(tokenizer.tokenPrefix(" hello world".repeat(500), 0)).as("64 words")
                .isEqualTo(" hello world".repeat(32));
        assertThat(tokenizer.tokenPrefix("short text", 0)).isEqualTo("short text");
    }

    @Test
    void aTextWhoseFirstWordsRunToAbsurdLengthsIsRefusedNamingItsElement() {
        String limit = Integer.toString(TextTokenizer.MAX_CHARS_PER_TOKEN * tokenizer.maxLength());
        assertThatThrownBy(() -> tokenizer.encode(List.of("fine", "a".repeat(20_000))))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("'text' element 1").hasMessageContaining(limit)
                .hasMessageContaining("at most " + tokenizer.maxLength() + " tokens");
        assertThatThrownBy(() -> tokenizer.encode(" ".repeat(1 << 20) + "hello"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'text' element 0");
        assertThat(tokenizer.encode("a".repeat(16_000)).getIds()).as("a long word within the limit: one [UNK]")
                .hasSize(3);
    }

    @Test
    void aBatchIsPaddedOnTheRightWithMaskZero() {
        TextTokenizer.Batch batch = tokenizer.encode(List.of("hello world", "Hello, World!"));
        assertThat(batch.batch()).isEqualTo(2);
        assertThat(batch.sequence()).isEqualTo(6);
        assertThat(batch.ids()).containsExactly(2, 77, 78, 3, 0, 0, 2, 77, 6, 78, 7, 3);
        assertThat(batch.attentionMask()).containsExactly(1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1);
        if (fixture.has("batch")) {
            List<Long> expected = new ArrayList<>();
            fixture.get("batch").get("input_ids").forEach(row -> row.forEach(id -> expected.add(id.longValue())));
            List<String> texts = new ArrayList<>();
            fixture.get("batch").get("texts").forEach(t -> texts.add(t.stringValue()));
            assertThat(tokenizer.encode(texts).ids()).containsExactly(expected.stream().mapToLong(Long::longValue).toArray());
        }
    }

    @Test
    void aFileThatIsNotATokenizerNamesItself(@org.junit.jupiter.api.io.TempDir Path folder) throws IOException {
        Path broken = Files.writeString(folder.resolve("tokenizer.json"), "{\"model\": 3}");
        assertThatThrownBy(() -> TextTokenizer.load(broken, 16)).isInstanceOf(ModelFormatException.class)
                .hasMessageContaining(broken.toString()).hasMessageContaining("cannot be loaded");
        assertThatThrownBy(() -> TextTokenizer.load(folder.resolve("absent.json"), 16))
                .isInstanceOf(ModelFormatException.class).hasMessageContaining("no such file");
    }

    private static long[] longs(JsonNode array) {
        long[] out = new long[array.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = array.get(i).longValue();
        }
        return out;
    }
}
