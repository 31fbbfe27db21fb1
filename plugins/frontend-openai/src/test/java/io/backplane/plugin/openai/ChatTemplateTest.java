package io.backplane.plugin.openai;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.core.type.TypeReference;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link ChatTemplate} against {@code transformers}: for each template (ChatML/Qwen with tools, Llama 3, Llama 3.1 with
 * tools as a {@code tool_use} template, Llama 2 and Mistral with {@code raise_exception}, Gemma with slicing and
 * {@code namespace}, and one full of Python string methods), each conversation, with and without the generation
 * prompt and tools, {@link ChatTemplate#render} must equal {@code apply_chat_template(..., tokenize=False)} byte for
 * byte, and a {@code raise_exception} must be an INVALID_ARGUMENT quoting the template's message. The tokenizer folders
 * are written by transformers itself ({@code save_pretrained}), in its three layouts.
 */
class ChatTemplateTest {

    /** name, template file(s), folder layout, special tokens, extra special tokens. */
    record Tok(String name, Map<String, String> templates, String layout, Map<String, String> special, List<String> extra) {}

    static final Map<String, String> LLAMA3 = Map.of("bos_token", "<|begin_of_text|>", "eos_token", "<|eot_id|>");
    static final Map<String, String> LLAMA2 = Map.of("bos_token", "<s>", "eos_token", "</s>", "unk_token", "<unk>");
    static final List<Tok> TOKENIZERS = List.of(
            new Tok("qwen", Map.of("default", "qwen-chatml.jinja"), "jinja",
                    Map.of("eos_token", "<|im_end|>", "pad_token", "<|endoftext|>"), List.of("<|im_start|>")),
            new Tok("llama3", Map.of("default", "llama3.jinja"), "config", LLAMA3,
                    List.of("<|start_header_id|>", "<|end_header_id|>")),
            new Tok("llama31", Map.of("default", "llama3.jinja", "tool_use", "llama31-tools.jinja"), "config-list", LLAMA3,
                    List.of("<|start_header_id|>", "<|end_header_id|>")),
            new Tok("llama2", Map.of("default", "llama2.jinja"), "config", LLAMA2, List.of()),
            new Tok("mistral", Map.of("default", "mistral.jinja"), "jinja", LLAMA2, List.of()),
            new Tok("gemma", Map.of("default", "gemma.jinja"), "jinja",
                    Map.of("bos_token", "<bos>", "eos_token", "<eos>", "pad_token", "<pad>"),
                    List.of("<start_of_turn>", "<end_of_turn>")),
            new Tok("pyisms", Map.of("default", "pyisms.jinja"), "jinja", LLAMA2, List.of()));

    static final List<String> STRFTIME = List.of("%d %b %Y", "%Y-%m-%d %H:%M:%S", "%A, %B %-d, %Y %I:%M %p", "%a %j %y %e %%",
            "%U %W %w %u %V %G", "%F %T %D %R", "%c", "%Q unknown");
    static final long WHEN = 1_722_000_061L; // 2024-07-26T13:21:01Z, a Friday

    record Case(String tokenizer, String conversation, boolean tools, boolean addGenerationPrompt) {}

    @TempDir
    static Path dir;
    static volatile Map<String, Object> answer;
    static List<Case> cases;
    static Map<String, List<Map<String, Object>>> conversations;
    static List<Map<String, Object>> tools;

    @BeforeAll
    static void inputs() {
        conversations = HfReference.parse(HfReference.resource("conversations.json"),
                new TypeReference<LinkedHashMap<String, List<Map<String, Object>>>>() {});
        tools = HfReference.messages(HfReference.resource("tools.json"));
    }

    /** transformers' answers for every case, made once (one python run) by the first test that needs them. */
    static synchronized void reference() throws IOException, InterruptedException {
        if (answer != null) {
            return;
        }
        HfReference.python();
        List<Map<String, Object>> toks = new ArrayList<>();
        for (Tok t : TOKENIZERS) {
            Map<String, Object> m = new HashMap<>();
            m.put("name", t.name());
            Map<String, String> texts = new LinkedHashMap<>();
            t.templates().forEach((k, v) -> texts.put(k, HfReference.resource("templates/" + v)));
            m.put("template", "config-list".equals(t.layout()) ? texts : texts.get("default"));
            m.put("layout", t.layout());
            m.put("special", t.special());
            m.put("extra_tokens", t.extra());
            toks.add(m);
        }
        cases = new ArrayList<>();
        List<Map<String, Object>> specCases = new ArrayList<>();
        for (Tok t : TOKENIZERS) {
            for (String conv : conversations.keySet()) {
                for (boolean withTools : List.of(false, true)) {
                    for (boolean agp : List.of(true, false)) {
                        Case c = new Case(t.name(), conv, withTools, agp);
                        cases.add(c);
                        Map<String, Object> m = new HashMap<>();
                        m.put("tokenizer", t.name());
                        m.put("messages", conversations.get(conv));
                        m.put("tools", withTools ? tools : null);
                        m.put("add_generation_prompt", agp);
                        specCases.add(m);
                    }
                }
            }
        }
        Map<String, Object> spec = new HashMap<>();
        spec.put("tokenizers", toks);
        spec.put("cases", specCases);
        spec.put("strftime", Map.of("epoch_seconds", WHEN, "formats", STRFTIME));
        answer = HfReference.run(dir, spec);
    }

    static Path folder(String tokenizer) {
        return dir.resolve("tokenizers").resolve(tokenizer);
    }

    @Test
    @SuppressWarnings("unchecked")
    void render_everyTemplateConversationAndFlag_equalsTransformersByteForByte() throws IOException, InterruptedException {
        reference();
        List<Map<String, String>> renders = (List<Map<String, String>>) answer.get("renders");
        Map<String, ChatTemplate> templates = new HashMap<>();
        for (Tok t : TOKENIZERS) {
            templates.put(t.name(), ChatTemplate.load(folder(t.name())).orElseThrow());
        }
        List<String> mismatches = new ArrayList<>();
        int compared = 0;
        int refused = 0;
        for (int i = 0; i < cases.size(); i++) {
            Case c = cases.get(i);
            Map<String, String> expected = renders.get(i);
            ChatTemplate template = templates.get(c.tokenizer());
            String label = c + " from " + template.source();
            String actual;
            try {
                actual = template.render(conversations.get(c.conversation()), c.addGenerationPrompt(), c.tools() ? tools : null);
            } catch (BackplaneException e) {
                String error = expected.get("error");
                if (error == null) {
                    mismatches.add(label + ": transformers renders\n" + expected.get("ok") + "\nbut render failed: " + e.getMessage());
                } else if (error.startsWith("TemplateError: ")) {
                    String msg = error.substring("TemplateError: ".length());
                    if (e.code() != ErrorCode.INVALID_ARGUMENT || !e.getMessage().contains("'" + msg + "'")) {
                        mismatches.add(label + ": transformers raised " + error + " but render threw " + e.code() + " " + e.getMessage());
                    } else {
                        refused++;
                    }
                } else {
                    refused++; // transformers fails too (a template that cannot handle the conversation)
                }
                continue;
            }
            if (expected.get("error") != null) {
                mismatches.add(label + ": transformers failed with " + expected.get("error") + " but render gave\n" + actual);
            } else if (!expected.get("ok").equals(actual)) {
                mismatches.add(label + ": " + firstDifference(expected.get("ok"), actual) + "\n--- transformers\n" + expected.get("ok")
                        + "\n--- render\n" + actual + "\n---");
            } else {
                compared++;
            }
        }
        assertTrue(mismatches.isEmpty(), mismatches.size() + " of " + cases.size() + " renders differ:\n" + String.join("\n\n", mismatches));
        assertTrue(compared > cases.size() / 2, "only " + compared + " renders compared equal, " + refused + " refused");
        assertTrue(refused > 0, "no case exercised raise_exception");
    }

    static String firstDifference(String expected, String actual) {
        int i = 0;
        while (i < expected.length() && i < actual.length() && expected.charAt(i) == actual.charAt(i)) {
            i++;
        }
        int from = Math.max(0, i - 20);
        return "first difference at char " + i + ": transformers [" + expected.substring(from, Math.min(expected.length(), i + 20))
                + "] render [" + actual.substring(from, Math.min(actual.length(), i + 20)) + "]";
    }

    @Test
    void render_rolesNotAlternating_isInvalidArgumentQuotingTheTemplateAndItsMessage() throws IOException, InterruptedException {
        reference();
        ChatTemplate mistral = ChatTemplate.load(folder("mistral")).orElseThrow();
        BackplaneException e = assertThrows(BackplaneException.class,
                () -> mistral.render(conversations.get("not_alternating"), true, null));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("'Conversation roles must alternate user/assistant/user/assistant/...'"), e.getMessage());
        assertTrue(e.getMessage().contains(folder("mistral").resolve("chat_template.jinja").toString()), e.getMessage());
        // the next render on the same thread is not affected by the previous refusal
        assertTrue(mistral.render(conversations.get("user_only"), true, null).endsWith("[INST] Hi [/INST]"));
    }

    /** One shared Jinjava engine and a per-thread raise_exception record: concurrent renders and refusals do not mix. */
    @Test
    void render_manyThreadsAtOnce_refusalsAndRendersDoNotMix() throws Exception {
        reference();
        ChatTemplate gemma = ChatTemplate.load(folder("gemma")).orElseThrow();
        String good = gemma.render(conversations.get("multi_turn"), true, null);
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            CountDownLatch start = new CountDownLatch(1);
            List<Future<String>> results = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                boolean refuse = t % 2 == 1;
                results.add(pool.submit(() -> {
                    start.await();
                    for (int k = 0; k < 100; k++) {
                        if (refuse) {
                            BackplaneException e = assertThrows(BackplaneException.class,
                                    () -> gemma.render(conversations.get("not_alternating"), true, null));
                            if (e.code() != ErrorCode.INVALID_ARGUMENT) {
                                return "refusal " + k + " was " + e;
                            }
                        } else if (!good.equals(gemma.render(conversations.get("multi_turn"), true, null))) {
                            return "render " + k + " differs";
                        }
                    }
                    return "ok";
                }));
            }
            start.countDown();
            for (Future<String> r : results) {
                assertEquals("ok", r.get(2, TimeUnit.MINUTES));
            }
        } finally {
            pool.shutdown();
            assertTrue(pool.awaitTermination(1, TimeUnit.MINUTES));
        }
    }

    @Test
    void load_folderLayouts_readAsTransformersReadsThem() throws IOException, InterruptedException {
        reference();
        ChatTemplate qwen = ChatTemplate.load(folder("qwen")).orElseThrow();
        assertTrue(qwen.source().endsWith("chat_template.jinja"), qwen.source());
        assertEquals("<|im_end|>", qwen.specialTokens().get("eos_token"));
        ChatTemplate llama3 = ChatTemplate.load(folder("llama3")).orElseThrow();
        assertTrue(llama3.source().endsWith("tokenizer_config.json"), llama3.source());
        assertEquals("<|begin_of_text|>", llama3.specialTokens().get("bos_token"));
        // config-list: default without tools, tool_use with them
        ChatTemplate llama31 = ChatTemplate.load(folder("llama31")).orElseThrow();
        String plain = llama31.render(conversations.get("user_only"), true, null);
        String withTools = llama31.render(conversations.get("user_only"), true, tools);
        assertFalse(plain.contains("Environment: ipython"), plain);
        assertTrue(withTools.contains("Environment: ipython"), withTools);
    }

    @Test
    void load_addedTokenDictsAndLegacyMap_takeTheirContent(@TempDir Path folder) throws IOException {
        Files.writeString(folder.resolve("tokenizer_config.json"), """
                {"bos_token": {"content": "<s>", "lstrip": false, "__type": "AddedToken"}, "eos_token": null,
                 "extra_special_tokens": {"image_token": "<img>"},
                 "chat_template": "{{ bos_token }}{{ eos_token }}{{ image_token }}{{ messages[0].content }}"}""");
        Files.writeString(folder.resolve("special_tokens_map.json"), """
                {"bos_token": "<ignored>", "eos_token": {"content": "</s>"}}""");
        ChatTemplate t = ChatTemplate.load(folder).orElseThrow();
        assertEquals(Map.of("bos_token", "<s>", "eos_token", "</s>", "image_token", "<img>"), t.specialTokens());
        assertEquals("<s></s><img>hi", t.render(HfReference.messages("[{\"role\":\"user\",\"content\":\"hi\"}]"), false, null));
    }

    @Test
    void load_noTemplate_isEmpty(@TempDir Path folder) throws IOException {
        assertEquals(Optional.empty(), ChatTemplate.load(folder));
        Files.writeString(folder.resolve("tokenizer_config.json"), "{\"bos_token\": \"<s>\"}");
        assertEquals(Optional.empty(), ChatTemplate.load(folder));
    }

    @Test
    void load_templateThatDoesNotParse_failsNamingTheFile(@TempDir Path folder) throws IOException {
        Path file = folder.resolve("chat_template.jinja");
        Files.writeString(file, HfReference.resource("templates/broken.jinja"));
        BackplaneException e = assertThrows(BackplaneException.class, () -> ChatTemplate.load(folder));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains(file.toString()) && e.getMessage().contains("endfor"), e.getMessage());
    }

    @Test
    void load_namedTemplatesWithoutDefault_failsListingTheNames(@TempDir Path folder) throws IOException {
        Files.writeString(folder.resolve("tokenizer_config.json"), """
                {"chat_template": [{"name": "rag", "template": "x"}, {"name": "tool_use", "template": "y"}]}""");
        BackplaneException e = assertThrows(BackplaneException.class, () -> ChatTemplate.load(folder));
        assertTrue(e.getMessage().contains("[rag, tool_use]") && e.getMessage().contains("'default'"), e.getMessage());
    }

    @Test
    void render_templateErrorThatIsNotRaiseException_isInternalNamingTheTemplate() {
        ChatTemplate t = ChatTemplate.of("test.jinja", "{{ messages[0].content.no_such_method() }}", Map.of());
        BackplaneException e = assertThrows(BackplaneException.class,
                () -> t.render(HfReference.messages("[{\"role\":\"user\",\"content\":\"hi\"}]"), false, null));
        assertEquals(ErrorCode.INTERNAL, e.code());
        assertTrue(e.getMessage().contains("test.jinja") && e.getMessage().contains("no_such_method"), e.getMessage());
        BackplaneException empty = assertThrows(BackplaneException.class, () -> t.render(List.of(), true, null));
        assertEquals(ErrorCode.INVALID_ARGUMENT, empty.code());
    }

    @Test
    @SuppressWarnings("unchecked")
    void strftime_fixedInstant_equalsPythonsStrftime() throws IOException, InterruptedException {
        reference();
        List<String> expected = (List<String>) answer.get("strftime");
        ZonedDateTime when = ZonedDateTime.ofInstant(Instant.ofEpochSecond(WHEN), ZoneOffset.UTC);
        for (int i = 0; i < STRFTIME.size(); i++) {
            assertEquals(expected.get(i), ChatTemplate.strftime(STRFTIME.get(i), when), STRFTIME.get(i));
        }
    }

    @Test
    void normalize_notBeforeATest_getsJinja2sPrecedence_andLeavesTextAndStringsAlone() {
        assertEquals("{%- if not (tools is defined) %}not x is defined{{ 'not a is b' }}{{ a and not (m['k'].x is not none) }}",
                ChatTemplate.normalize("{%- if not tools is defined %}not x is defined{{ 'not a is b' }}{{ a and not m['k'].x is not none }}\n"));
        ChatTemplate t = ChatTemplate.of("t", "{{ not tools is defined }},{{ true and not tools is none }}", Map.of());
        assertEquals("false,true", t.render(HfReference.messages("[{\"role\":\"user\",\"content\":\"hi\"}]"), false, tools));
    }

    @Test
    void render_contentThatLooksLikeJinja_isTextNeverRenderedAgain() {
        ChatTemplate t = ChatTemplate.of("t", "{{ messages[0].content }}", Map.of());
        assertEquals("{{ raise_exception('x') }}{% for %}", t.render(
                HfReference.messages("[{\"role\":\"user\",\"content\":\"{{ raise_exception('x') }}{% for %}\"}]"), false, null));
    }

    @Test
    void tojson_pythonJsonDumps() {
        assertEquals("{\"a\": [1, 2.5, 1e-05, 1e+16, 0.1, true, null], \"b\": \"\u00e9\\\"\\n\\u0001\"}",
                ChatTemplate.PyJson.dumps(HfReference.parse("{\"a\": [1, 2.5, 1e-05, 1e16, 0.1, true, null], \"b\": \"\u00e9\\\"\\n\\u0001\"}",
                        new TypeReference<Map<String, Object>>() {}), false, null, null, false));
        assertEquals("{\n  \"a\": \"\\u00e9\",\n  \"b\": []\n}",
                ChatTemplate.PyJson.dumps(HfReference.parse("{\"b\": [], \"a\": \"\u00e9\"}",
                        new TypeReference<Map<String, Object>>() {}), true, 2, null, true));
        assertEquals("123456789012345.0", ChatTemplate.PyJson.floatRepr(123456789012345.0));
        assertEquals("1.5e-07", ChatTemplate.PyJson.floatRepr(1.5e-7));
        assertEquals("0.0001", ChatTemplate.PyJson.floatRepr(1e-4));
    }
}
