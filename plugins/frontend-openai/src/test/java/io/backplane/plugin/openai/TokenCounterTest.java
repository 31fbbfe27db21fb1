package io.backplane.plugin.openai;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link TokenCounter} against {@code transformers}: for tokenizers trained and saved by transformers (a Llama-style
 * one whose post-processor adds BOS, a ChatML one, a Gemma-style one), every text's count must equal
 * {@code len(tok(text, add_special_tokens=False).input_ids)} and, with special tokens,
 * {@code len(tok(text).input_ids)}. The native library comes from DJL's jar, offline ({@code ai.djl.offline=true} and a
 * cache folder under target/, set in this module's surefire configuration).
 */
class TokenCounterTest {

    static final List<String> TEXTS = List.of(
            "",
            "Hello world",
            " leading and trailing spaces  ",
            "héllo 世界 🚀 — ‘quotes’ «guillemets» no-break\u00a0space",
            "Say \"hi\" and 'bye'.\nSecond line\\with backslash\n\n\ttab",
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is the weather?<|im_end|>\n<|im_start|>assistant\n",
            "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n",
            "The quick brown fox jumps over the lazy dog. ".repeat(300)); // ~3000 tokens: no truncation at 512

    static final List<String> TOKENIZERS = List.of("llama3", "qwen", "gemma");

    @TempDir
    static Path dir;
    static volatile Map<String, Object> answer;

    /** transformers' counts and the tokenizer folders, made once (one python run) by the first test that needs them. */
    static synchronized void reference() throws IOException, InterruptedException {
        if (answer != null) {
            return;
        }
        HfReference.python();
        List<Map<String, Object>> toks = List.of(
                tokenizer("llama3", Map.of("bos_token", "<|begin_of_text|>", "eos_token", "<|eot_id|>"),
                        List.of("<|start_header_id|>", "<|end_header_id|>"), true),
                tokenizer("qwen", Map.of("eos_token", "<|im_end|>", "pad_token", "<|endoftext|>"), List.of("<|im_start|>"), false),
                tokenizer("gemma", Map.of("bos_token", "<bos>", "eos_token", "<eos>", "pad_token", "<pad>"),
                        List.of("<start_of_turn>", "<end_of_turn>"), false));
        List<Map<String, Object>> counts = new ArrayList<>();
        for (String t : TOKENIZERS) {
            for (String text : TEXTS) {
                counts.add(Map.of("tokenizer", t, "text", text));
            }
        }
        Map<String, Object> spec = new HashMap<>();
        spec.put("tokenizers", toks);
        spec.put("cases", List.of());
        spec.put("counts", counts);
        answer = HfReference.run(dir, spec);
    }

    static Map<String, Object> tokenizer(String name, Map<String, String> special, List<String> extra, boolean bosPostProcessor) {
        Map<String, Object> m = new HashMap<>();
        m.put("name", name);
        m.put("template", "{{ messages[0]['content'] }}");
        m.put("layout", "jinja");
        m.put("special", special);
        m.put("extra_tokens", extra);
        m.put("bos_post_processor", bosPostProcessor);
        return m;
    }

    static Path folder(String tokenizer) {
        return dir.resolve("tokenizers").resolve(tokenizer);
    }

    @Test
    @SuppressWarnings("unchecked")
    void count_everyTokenizerAndText_equalsTransformers() throws IOException, InterruptedException {
        reference();
        List<List<Integer>> expected = (List<List<Integer>>) answer.get("counts");
        List<String> mismatches = new ArrayList<>();
        int i = 0;
        for (String t : TOKENIZERS) {
            try (TokenCounter counter = TokenCounter.load(folder(t)).orElseThrow()) {
                for (String text : TEXTS) {
                    List<Integer> want = expected.get(i++);
                    int without = counter.count(text);
                    int with = counter.count(text, true);
                    if (without != want.get(0) || with != want.get(1)) {
                        mismatches.add(t + " " + HfReference.JSON.valueToTree(text.length() > 60 ? text.substring(0, 60) + "..." : text)
                                + ": transformers " + want + ", TokenCounter [" + without + ", " + with + "]");
                    }
                }
            }
        }
        assertTrue(mismatches.isEmpty(), String.join("\n", mismatches));
        // the Llama-style post-processor adds exactly the BOS; the long text is counted whole
        assertEquals(expected.get(1).get(0) + 1, expected.get(1).get(1));
        assertTrue(expected.get(TEXTS.size() - 1).get(0) > 1000, "the long text has " + expected.get(TEXTS.size() - 1));
    }

    @Test
    void count_afterClose_failsNamingTheFile_andCloseIsIdempotent() throws IOException, InterruptedException {
        reference();
        TokenCounter counter = TokenCounter.load(folder("qwen")).orElseThrow();
        assertTrue(counter.count("Hello world") > 0);
        counter.close();
        counter.close();
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> counter.count("Hello world"));
        assertTrue(e.getMessage().contains(folder("qwen").resolve("tokenizer.json").toString()), e.getMessage());
    }

    @Test
    void count_manyThreadsAtOnce_allAgree() throws Exception {
        reference();
        String text = TEXTS.get(3);
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try (TokenCounter counter = TokenCounter.load(folder("llama3")).orElseThrow()) {
            int expected = counter.count(text);
            CountDownLatch start = new CountDownLatch(1);
            List<Future<Boolean>> results = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                results.add(pool.submit(() -> {
                    start.await();
                    for (int k = 0; k < 200; k++) {
                        if (counter.count(text) != expected) {
                            return false;
                        }
                    }
                    return true;
                }));
            }
            start.countDown();
            for (Future<Boolean> r : results) {
                assertTrue(r.get(1, TimeUnit.MINUTES));
            }
        } finally {
            pool.shutdown();
            assertTrue(pool.awaitTermination(1, TimeUnit.MINUTES));
        }
    }

    @Test
    void load_noTokenizerJson_isEmpty_andABadOneFailsNamingTheFile(@TempDir Path folder) throws IOException {
        assertEquals(Optional.empty(), TokenCounter.load(folder));
        Path file = folder.resolve("tokenizer.json");
        Files.writeString(file, "{\"not\": \"a tokenizer\"}");
        BackplaneException e = assertThrows(BackplaneException.class, () -> TokenCounter.load(folder));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains(file.toString()), e.getMessage());
    }
}
