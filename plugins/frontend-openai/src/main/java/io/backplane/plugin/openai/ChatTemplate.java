package io.backplane.plugin.openai;

import static java.util.Objects.requireNonNull;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.hubspot.jinjava.Jinjava;
import com.hubspot.jinjava.JinjavaConfig;
import com.hubspot.jinjava.LegacyOverrides;
import com.hubspot.jinjava.el.JinjavaInterpreterResolver;
import com.hubspot.jinjava.interpret.JinjavaInterpreter;
import com.hubspot.jinjava.interpret.RenderResult;
import com.hubspot.jinjava.interpret.TemplateError;
import com.hubspot.jinjava.lib.exptest.ExpTest;
import com.hubspot.jinjava.lib.filter.Filter;
import com.hubspot.jinjava.lib.fn.ELFunctionDefinition;
import com.hubspot.jinjava.lib.tag.Tag;
import com.hubspot.jinjava.objects.SafeString;
import com.hubspot.jinjava.tree.Node;
import com.hubspot.jinjava.tree.TagNode;
import io.backplane.spi.BackplaneException;
import java.beans.FeatureDescriptor;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.ZonedDateTime;
import java.time.format.TextStyle;
import java.time.temporal.IsoFields;
import java.util.AbstractMap;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import jinjava.javax.el.CompositeELResolver;
import jinjava.javax.el.ELContext;
import jinjava.javax.el.ELResolver;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A model's Hugging Face chat template, rendered the way {@code transformers} renders it:
 * {@code tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=...)}.
 *
 * <h2>What "Hugging Face compatible" means here</h2>
 * <ul>
 *   <li><b>Where the template comes from</b>, as {@code transformers} 5 reads a tokenizer folder:
 *       {@code chat_template.jinja} (plus named templates in {@code additional_chat_templates/*.jinja}),
 *       which take priority over {@code tokenizer_config.json}'s {@code chat_template} (a string, or a list of
 *       {@code {name, template}}). With several named templates, {@code tool_use} is taken when tools are passed
 *       and exists, else {@code default}; a folder with named templates and no {@code default} is refused, as
 *       {@code transformers} refuses it.</li>
 *   <li><b>The variables</b> are those {@code apply_chat_template} passes: {@code messages}, {@code tools}
 *       (or none), {@code documents} (none), {@code add_generation_prompt}, and the tokenizer's named special tokens
 *       ({@code bos_token}, {@code eos_token}, {@code unk_token}, {@code sep_token}, {@code pad_token},
 *       {@code cls_token}, {@code mask_token}, and a dict-valued {@code extra_special_tokens}), each a string or an
 *       {@code AddedToken} dict whose {@code content} is taken; {@code special_tokens_map.json} fills in names
 *       {@code tokenizer_config.json} lacks.</li>
 *   <li><b>The environment</b> is {@code transformers}' own: {@code trim_blocks} and {@code lstrip_blocks} on, one
 *       trailing newline of the template dropped (Jinja2's {@code keep_trailing_newline=False}), the
 *       {@code loopcontrols} extension ({@code break}/{@code continue}), the {@code generation} block (rendered as
 *       its body), {@code raise_exception(msg)}, {@code strftime_now(fmt)} (local time, C locale) and a
 *       {@code tojson} filter with Python's {@code json.dumps} output ({@code ensure_ascii=False}, {@code ", "} and
 *       {@code ": "} separators, {@code indent}, {@code separators}, {@code sort_keys}).</li>
 *   <li><b>Python-isms</b> that templates use and that Jinjava (HubSpot's Java Jinja) lacks are added: the string
 *       methods {@code strip/lstrip/rstrip([chars])}, {@code split([sep[, maxsplit]])}, {@code rsplit},
 *       {@code splitlines}, {@code startswith/endswith} (a string or a tuple), {@code upper/lower/title/capitalize},
 *       {@code replace(old, new[, count])}, {@code find/rfind/count}, {@code join}, the {@code is...()} tests, string
 *       indexing ({@code s[0]}, {@code s[-1]}, by code point); the {@code trim} filter with Python's whitespace
 *       (no-break spaces included); the {@code items} filter; the {@code iterable} and {@code sequence} tests true
 *       for strings. Jinjava itself provides slicing ({@code messages[1:]}), {@code namespace()},
 *       {@code loop.first/last/index0/length}, {@code is string/mapping/defined/none}, {@code dict.items()/keys()/
 *       get(k, default)}, macros, {@code selectattr/map/join}, {@code break/continue}.</li>
 *   <li><b>Jinja2's precedence</b>: {@code not x is defined} is {@code not (x is defined)} in Jinja2 but
 *       {@code (not x) is defined} in Jinjava; the template's source gets the parentheses written in (Llama 3.x
 *       templates depend on it).</li>
 *   <li><b>Values are text</b>: Jinjava's nested interpretation is off, so a message containing {@code {{ ... }}} or
 *       {@code {% ... %}} is copied as text, as Jinja2 does, never rendered (Jinjava's default would render it: a
 *       template injection).</li>
 * </ul>
 *
 * <h2>Known limits</h2>
 * A few Jinja2 behaviours differ in Jinjava and are not patched; none is used by the templates the tests compare
 * byte for byte with {@code transformers} (ChatML/Qwen 2.5 with tools, Llama 2, Llama 3, Llama 3.1 with tools,
 * Mistral, Gemma, and one exercising the Python string methods):
 * <ul>
 *   <li>a boolean or none printed directly renders {@code true}/{@code false}/empty, not Python's
 *       {@code True}/{@code False}/{@code None} (inside {@code tojson} they are right: {@code true}/{@code null});
 *       dicts and lists printed directly (not through {@code tojson}) use Jinjava's Python-like repr, which writes
 *       {@code true}/{@code null} inside too;</li>
 *   <li>a variable that is none ({@code tools} when no tools are passed, {@code documents}) is "not defined" in
 *       Jinjava but defined in Jinja2: {@code tools is defined} alone differs, {@code tools is not none},
 *       {@code if tools} and {@code tools is defined and tools} agree;</li>
 *   <li>{@code loop.previtem/nextitem/cycle}, a test with an argument after {@code not x is} (e.g.
 *       {@code not x is divisibleby 3}) and Python's backslash-u escapes inside template string literals are not supported; an
 *       undefined variable's attribute renders empty where Jinja2 would fail;</li>
 *   <li>the {@code length} filter counts UTF-16 units, not code points (differs only for characters outside the
 *       BMP, such as emoji).</li>
 * </ul>
 * A template error that is not a {@code raise_exception} (an unknown method, a failed expression) fails the render
 * with {@link io.backplane.spi.ErrorCode#INTERNAL} naming the template and Jinjava's message, never a silently
 * wrong prompt.
 *
 * <p>Thread-safe and immutable: one instance per model, {@link #render} from any thread. The Jinjava engine is shared
 * by all instances.
 */
public final class ChatTemplate {

    private static final Logger LOG = LoggerFactory.getLogger(ChatTemplate.class);

    /** The named special tokens {@code transformers} passes to every template (its SPECIAL_TOKENS_ATTRIBUTES). */
    static final List<String> SPECIAL_TOKEN_NAMES =
            List.of("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token");

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final ThreadLocal<@Nullable String> RAISED = new ThreadLocal<>();
    private static final Jinjava JINJAVA = newJinjava();

    private final String source;
    private final String template;
    private final @Nullable String toolUseTemplate;
    private final Map<String, String> specialTokens;

    private ChatTemplate(String source, String template, @Nullable String toolUseTemplate, Map<String, String> specialTokens) {
        this.source = source;
        this.template = template;
        this.toolUseTemplate = toolUseTemplate;
        this.specialTokens = specialTokens;
    }

    /**
     * A template given as text (for a server option that overrides a model's template, and for tests).
     *
     * @param source names the template in error messages, e.g. the file it came from
     * @param template the Jinja source
     * @param specialTokens the special-token variables ({@code bos_token} ...) the template sees
     * @throws BackplaneException INVALID_ARGUMENT naming {@code source} where the template does not parse
     */
    public static ChatTemplate of(String source, String template, Map<String, String> specialTokens) {
        requireNonNull(source, "source is null");
        requireNonNull(template, "template is null");
        String t = normalize(template);
        checkParses(source, t);
        return new ChatTemplate(source, t, null, Map.copyOf(specialTokens));
    }

    /**
     * The chat template of a Hugging Face tokenizer folder (a model's folder, or its tokenizer subfolder), read as
     * {@code transformers} 5 reads it (see the type's Javadoc).
     *
     * @return empty where the folder has no chat template (no {@code chat_template.jinja} and no
     *     {@code chat_template} in {@code tokenizer_config.json})
     * @throws BackplaneException INVALID_ARGUMENT naming the file where a file cannot be read or is not valid JSON,
     *     where a template does not parse, or where there are named templates and none is {@code default}
     */
    public static Optional<ChatTemplate> load(Path tokenizerDir) {
        requireNonNull(tokenizerDir, "tokenizerDir is null");
        Path configFile = tokenizerDir.resolve("tokenizer_config.json");
        JsonNode config = readJson(configFile);
        Map<String, String> specialTokens = specialTokens(config, readJson(tokenizerDir.resolve("special_tokens_map.json")));

        Map<String, String> templates = new LinkedHashMap<>();
        Map<String, Path> files = new HashMap<>();
        Path jinjaFile = tokenizerDir.resolve("chat_template.jinja");
        if (Files.isRegularFile(jinjaFile)) {
            templates.put("default", readString(jinjaFile));
            files.put("default", jinjaFile);
        }
        Path extraDir = tokenizerDir.resolve("additional_chat_templates");
        if (Files.isDirectory(extraDir)) {
            try (Stream<Path> list = Files.list(extraDir)) {
                for (Path f : list.sorted().toList()) {
                    String name = f.getFileName().toString();
                    if (name.endsWith(".jinja") && Files.isRegularFile(f)) {
                        String key = name.substring(0, name.length() - ".jinja".length());
                        templates.put(key, readString(f));
                        files.put(key, f);
                    }
                }
            } catch (IOException e) {
                throw new BackplaneException(io.backplane.spi.ErrorCode.INVALID_ARGUMENT,
                        "cannot list the chat templates in " + extraDir + ": " + e.getMessage() + "; check the folder's permissions", e);
            }
        }
        if (templates.isEmpty() && config != null && config.has("chat_template") && !config.get("chat_template").isNull()) {
            JsonNode ct = config.get("chat_template");
            if (ct.isTextual()) {
                templates.put("default", ct.asText());
            } else if (ct.isArray()) {
                for (JsonNode entry : ct) {
                    if (!entry.path("name").isTextual() || !entry.path("template").isTextual()) {
                        throw BackplaneException.invalid(configFile + ": chat_template entry " + entry
                                + " is not a {\"name\": ..., \"template\": ...} pair of strings; fix the file");
                    }
                    templates.put(entry.get("name").asText(), entry.get("template").asText());
                }
            } else {
                throw BackplaneException.invalid(configFile + ": chat_template is a " + ct.getNodeType()
                        + ", expected a string or a list of {\"name\": ..., \"template\": ...}; fix the file");
            }
            templates.keySet().forEach(k -> files.put(k, configFile));
        }
        if (templates.isEmpty()) {
            return Optional.empty();
        }
        String def = templates.get("default");
        if (def == null) {
            throw BackplaneException.invalid(tokenizerDir + " has several chat templates " + new TreeMap<>(templates).keySet()
                    + " and none named 'default' (transformers refuses such a folder too); name one of them 'default'");
        }
        String source = sourceName(files.get("default"), "default", configFile);
        String defNorm = normalize(def);
        checkParses(source, defNorm);
        String toolUse = templates.get("tool_use");
        String toolUseNorm = null;
        if (toolUse != null) {
            toolUseNorm = normalize(toolUse);
            checkParses(sourceName(files.get("tool_use"), "tool_use", configFile), toolUseNorm);
        }
        LOG.debug("chat template of {} from {} (tool_use template: {}), special tokens {}", tokenizerDir, source,
                toolUse != null, specialTokens.keySet());
        return Optional.of(new ChatTemplate(source, defNorm, toolUseNorm, Map.copyOf(specialTokens)));
    }

    /** Where the template came from, as error messages name it (a file, or a file and a template name). */
    public String source() {
        return source;
    }

    /** The special-token variables the template sees ({@code bos_token} ...), never null. */
    public Map<String, String> specialTokens() {
        return specialTokens;
    }

    /**
     * Renders a conversation as {@code apply_chat_template(messages, tools=tools, tokenize=False,
     * add_generation_prompt=addGenerationPrompt)} does.
     *
     * @param messages the conversation, as the client sent it: maps with {@code role}, {@code content} (a string,
     *     a list of parts, or null) and whatever else the template reads ({@code tool_calls}, {@code name} ...); the
     *     maps' iteration order is the order {@code tojson} writes keys in
     * @param tools the tool schemas ({@code {"type": "function", "function": {...}}}), or null for none
     * @return the prompt text, special tokens included as text
     * @throws BackplaneException INVALID_ARGUMENT where the conversation is empty or the template refuses it
     *     ({@code raise_exception}, e.g. roles that do not alternate), quoting the template's message;
     *     INTERNAL where the template fails in another way (naming the template and the error)
     */
    public String render(List<? extends Map<String, ?>> messages, boolean addGenerationPrompt,
            @Nullable List<? extends Map<String, ?>> tools) {
        requireNonNull(messages, "messages is null");
        if (messages.isEmpty()) {
            throw BackplaneException.invalid("cannot apply the chat template to an empty conversation; send at least one message");
        }
        String t = tools != null && toolUseTemplate != null ? toolUseTemplate : template;
        Map<String, @Nullable Object> bindings = new HashMap<>(specialTokens);
        bindings.put("messages", messages);
        bindings.put("tools", tools);
        bindings.put("documents", null);
        bindings.put("add_generation_prompt", addGenerationPrompt);
        RAISED.remove();
        try {
            RenderResult result = JINJAVA.renderForResult(t, bindings);
            String raised = RAISED.get();
            if (raised != null) {
                throw BackplaneException.invalid("the chat template of the model (" + source + ") refused the conversation: '"
                        + raised + "'");
            }
            List<TemplateError> fatal = result.getErrors().stream()
                    .filter(e -> e.getSeverity() == TemplateError.ErrorType.FATAL).toList();
            if (!fatal.isEmpty()) {
                throw BackplaneException.internal("the chat template of the model (" + source + ") failed: " + describe(fatal)
                        + "; the template uses a Jinja feature this server does not render, pass a compatible template");
            }
            return result.getOutput();
        } finally {
            RAISED.remove();
        }
    }

    @Override
    public String toString() {
        return "ChatTemplate[" + source + "]";
    }

    // ---- loading ----

    private static String sourceName(@Nullable Path file, String name, Path configFile) {
        Path f = file != null ? file : configFile;
        return f.equals(configFile) && !"default".equals(name) ? f + " (template '" + name + "')" : f.toString();
    }

    /**
     * Jinja2's lexer: newlines become \n, and one trailing newline is dropped ({@code keep_trailing_newline=False});
     * then {@link #notBindsLooserThanIs}.
     */
    static String normalize(String template) {
        String t = template.replace("\r\n", "\n").replace('\r', '\n');
        return notBindsLooserThanIs(t.endsWith("\n") ? t.substring(0, t.length() - 1) : t);
    }

    /** A string literal (skipped), or {@code not <variable path> is [not] <test>}. */
    private static final Pattern NOT_IS = Pattern.compile(
            "'(?:[^'\\\\]|\\\\.)*'|\"(?:[^\"\\\\]|\\\\.)*\""
            + "|\\bnot\\s+([A-Za-z_]\\w*(?:\\.[A-Za-z_]\\w*|\\[(?:'[^']*'|\"[^\"]*\"|[^\\]'\"]*)\\])*)\\s+is\\s+((?:not\\s+)?[A-Za-z_]\\w*)\\b");

    /**
     * In Jinja2 {@code not x is defined} means {@code not (x is defined)}; Jinjava reads {@code (not x) is defined}.
     * Llama 3.x templates write {@code if not tools is defined} and {@code and not tools is none}, so inside every
     * {@code {{ }}} and {@code {% %}} (outside string literals) {@code not PATH is [not] TEST} gets its parentheses.
     */
    static String notBindsLooserThanIs(String template) {
        StringBuilder out = new StringBuilder(template.length() + 16);
        int i = 0;
        int n = template.length();
        while (i < n) {
            int open = indexOfTagStart(template, i);
            if (open < 0) {
                out.append(template, i, n);
                break;
            }
            out.append(template, i, open);
            char kind = template.charAt(open + 1);
            if (kind == '#') {
                int close = template.indexOf("#}", open + 2);
                int end = close < 0 ? n : close + 2;
                out.append(template, open, end);
                i = end;
                continue;
            }
            String closer = kind == '{' ? "}}" : "%}";
            int end = codeEnd(template, open + 2, closer);
            String code = template.substring(open, end);
            Matcher m = NOT_IS.matcher(code);
            StringBuilder rewritten = new StringBuilder();
            while (m.find()) {
                String replacement = m.group(1) == null ? m.group() : "not (" + m.group(1) + " is " + m.group(2) + ")";
                m.appendReplacement(rewritten, Matcher.quoteReplacement(replacement));
            }
            m.appendTail(rewritten);
            out.append(rewritten);
            i = end;
        }
        return out.toString();
    }

    private static int indexOfTagStart(String t, int from) {
        for (int i = t.indexOf('{', from); i >= 0 && i + 1 < t.length(); i = t.indexOf('{', i + 1)) {
            char c = t.charAt(i + 1);
            if (c == '{' || c == '%' || c == '#') {
                return i;
            }
        }
        return -1;
    }

    /** The end (after the closer) of a {@code {{ }}} or {@code {% %}} starting before {@code from}, string literals skipped. */
    private static int codeEnd(String t, int from, String closer) {
        char quote = 0;
        for (int i = from; i < t.length(); i++) {
            char c = t.charAt(i);
            if (quote != 0) {
                if (c == '\\') {
                    i++;
                } else if (c == quote) {
                    quote = 0;
                }
            } else if (c == '\'' || c == '"') {
                quote = c;
            } else if (t.startsWith(closer, i)) {
                return i + closer.length();
            }
        }
        return t.length();
    }

    private static void checkParses(String source, String template) {
        JinjavaInterpreter interpreter = JINJAVA.newInterpreter();
        interpreter.parse(template);
        List<TemplateError> fatal = interpreter.getErrors().stream()
                .filter(e -> e.getSeverity() == TemplateError.ErrorType.FATAL).toList();
        if (!fatal.isEmpty()) {
            throw BackplaneException.invalid("the chat template " + source + " does not parse: " + describe(fatal)
                    + "; fix the template");
        }
    }

    private static String describe(List<TemplateError> errors) {
        return errors.stream().limit(3).map(e -> "line " + e.getLineno() + ": " + e.getMessage())
                .collect(Collectors.joining("; "));
    }

    private static @Nullable JsonNode readJson(Path file) {
        if (!Files.isRegularFile(file)) {
            return null;
        }
        try {
            return JSON.readTree(file.toFile());
        } catch (IOException e) {
            throw new BackplaneException(io.backplane.spi.ErrorCode.INVALID_ARGUMENT,
                    "cannot read " + file + " as JSON: " + e.getMessage() + "; fix the file", e);
        }
    }

    private static String readString(Path file) {
        try {
            return Files.readString(file, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new BackplaneException(io.backplane.spi.ErrorCode.INVALID_ARGUMENT,
                    "cannot read the chat template " + file + ": " + e.getMessage() + "; check the file", e);
        }
    }

    private static Map<String, String> specialTokens(@Nullable JsonNode config, @Nullable JsonNode legacyMap) {
        Map<String, String> tokens = new LinkedHashMap<>();
        for (JsonNode source : new JsonNode[] {config, legacyMap}) {
            if (source == null) {
                continue;
            }
            for (String name : SPECIAL_TOKEN_NAMES) {
                String value = tokenText(source.get(name));
                if (value != null) {
                    tokens.putIfAbsent(name, value);
                }
            }
            JsonNode extra = source.get("extra_special_tokens");
            if (extra != null && extra.isObject()) {
                for (Map.Entry<String, JsonNode> e : extra.properties()) {
                    String value = tokenText(e.getValue());
                    if (value != null) {
                        tokens.putIfAbsent(e.getKey(), value);
                    }
                }
            }
        }
        return tokens;
    }

    private static @Nullable String tokenText(@Nullable JsonNode node) {
        if (node == null || node.isNull()) {
            return null;
        }
        if (node.isTextual()) {
            return node.asText();
        }
        JsonNode content = node.get("content");
        return content != null && content.isTextual() ? content.asText() : null;
    }

    // ---- the engine ----

    private static Jinjava newJinjava() {
        CompositeELResolver resolver = new CompositeELResolver();
        resolver.add(new PythonStringResolver());
        resolver.add(JinjavaInterpreterResolver.DEFAULT_RESOLVER_READ_ONLY);
        JinjavaConfig config = JinjavaConfig.newBuilder()
                .withTrimBlocks(true)
                .withLstripBlocks(true)
                .withKeepTrailingNewline(true) // the one trailing newline is dropped by normalize, as Jinja2 does
                .withElResolver(resolver)
                // a value that looks like Jinja ("{{ x }}" in a user's message) is text, never rendered again
                .withNestedInterpretationEnabled(false)
                .withLegacyOverrides(LegacyOverrides.newBuilder()
                        .withUsePyishObjectMapper(true)
                        .withUseNaturalOperatorPrecedence(true)
                        .withParseWhitespaceControlStrictly(true)
                        .withUseTrimmingForNotesAndExpressions(true)
                        .withKeepNullableLoopValues(true)
                        .withEvaluateMapKeys(true)
                        .withIterateOverMapKeys(true)
                        .withHandleBackslashInQuotesOnly(true)
                        .withAllowAdjacentTextNodes(true)
                        .build())
                .build();
        Jinjava jinjava = new Jinjava(config);
        jinjava.registerFunction(new ELFunctionDefinition("", "raise_exception", ChatTemplate.class, "raiseException", Object.class));
        jinjava.registerFunction(new ELFunctionDefinition("", "strftime_now", ChatTemplate.class, "strftimeNow", Object.class));
        jinjava.registerFilter(new ToJsonFilter());
        jinjava.registerFilter(new TrimFilter());
        jinjava.registerFilter(new ItemsFilter());
        jinjava.registerTag(new GenerationTag());
        jinjava.registerExpTest(new PythonContainerTest("iterable"));
        jinjava.registerExpTest(new PythonContainerTest("sequence"));
        return jinjava;
    }

    /** {@code raise_exception(msg)}: records the message for {@link #render} and stops the expression. */
    public static Object raiseException(@Nullable Object message) {
        String m = String.valueOf(message);
        RAISED.set(m);
        throw new IllegalStateException("raise_exception: " + m);
    }

    /** {@code strftime_now(fmt)}: the local time, formatted as Python's {@code datetime.now().strftime(fmt)}. */
    public static String strftimeNow(@Nullable Object format) {
        return strftime(String.valueOf(format), ZonedDateTime.now());
    }

    /** Python's {@code strftime} in the C locale (glibc's {@code %-d} style flags included); unknown codes stay as written. */
    static String strftime(String format, ZonedDateTime t) {
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < format.length(); i++) {
            char c = format.charAt(i);
            if (c != '%' || i + 1 >= format.length()) {
                out.append(c);
                continue;
            }
            char d = format.charAt(++i);
            boolean noPad = false;
            if (d == '-' && i + 1 < format.length()) {
                noPad = true;
                d = format.charAt(++i);
            }
            int hour12 = t.getHour() % 12 == 0 ? 12 : t.getHour() % 12;
            String v = switch (d) {
                case 'a' -> t.getDayOfWeek().getDisplayName(TextStyle.SHORT, Locale.ENGLISH);
                case 'A' -> t.getDayOfWeek().getDisplayName(TextStyle.FULL, Locale.ENGLISH);
                case 'w' -> Integer.toString(t.getDayOfWeek().getValue() % 7);
                case 'd' -> pad(t.getDayOfMonth(), 2, noPad);
                case 'e' -> noPad ? Integer.toString(t.getDayOfMonth()) : String.format(Locale.ROOT, "%2d", t.getDayOfMonth());
                case 'b', 'h' -> t.getMonth().getDisplayName(TextStyle.SHORT, Locale.ENGLISH);
                case 'B' -> t.getMonth().getDisplayName(TextStyle.FULL, Locale.ENGLISH);
                case 'm' -> pad(t.getMonthValue(), 2, noPad);
                case 'y' -> pad(t.getYear() % 100, 2, noPad);
                case 'Y' -> Integer.toString(t.getYear());
                case 'H' -> pad(t.getHour(), 2, noPad);
                case 'I' -> pad(hour12, 2, noPad);
                case 'p' -> t.getHour() < 12 ? "AM" : "PM";
                case 'M' -> pad(t.getMinute(), 2, noPad);
                case 'S' -> pad(t.getSecond(), 2, noPad);
                case 'f' -> pad(t.getNano() / 1000, 6, false);
                case 'j' -> pad(t.getDayOfYear(), 3, noPad);
                case 'U' -> pad((t.getDayOfYear() + 6 - t.getDayOfWeek().getValue() % 7) / 7, 2, noPad);
                case 'W' -> pad((t.getDayOfYear() + 6 - (t.getDayOfWeek().getValue() + 6) % 7) / 7, 2, noPad);
                case 'V' -> pad(t.get(IsoFields.WEEK_OF_WEEK_BASED_YEAR), 2, noPad);
                case 'G' -> Integer.toString(t.get(IsoFields.WEEK_BASED_YEAR));
                case 'u' -> Integer.toString(t.getDayOfWeek().getValue());
                case 'z' -> offset(t.getOffset().getTotalSeconds());
                case 'Z' -> t.getZone().getDisplayName(TextStyle.SHORT, Locale.ENGLISH);
                case 'D' -> strftime("%m/%d/%y", t);
                case 'F' -> strftime("%Y-%m-%d", t);
                case 'T' -> strftime("%H:%M:%S", t);
                case 'R' -> strftime("%H:%M", t);
                case 'c' -> strftime("%a %b %e %H:%M:%S %Y", t);
                case 'x' -> strftime("%m/%d/%y", t);
                case 'X' -> strftime("%H:%M:%S", t);
                case 's' -> Long.toString(t.toEpochSecond());
                case 'n' -> "\n";
                case 't' -> "\t";
                case '%' -> "%";
                default -> null;
            };
            out.append(v != null ? v : (noPad ? "%-" + d : "%" + d));
        }
        return out.toString();
    }

    private static String pad(long v, int width, boolean noPad) {
        String s = Long.toString(v);
        return noPad || s.length() >= width ? s : "0".repeat(width - s.length()) + s;
    }

    private static String offset(int seconds) {
        int abs = Math.abs(seconds);
        return (seconds < 0 ? "-" : "+") + pad(abs / 3600, 2, false) + pad(abs / 60 % 60, 2, false)
                + (abs % 60 != 0 ? pad(abs % 60, 2, false) : "");
    }

    private static String str(@Nullable Object v) {
        return v == null ? "None" : v instanceof Boolean b ? (b ? "True" : "False") : v.toString();
    }

    /** {@code trim(chars=None)}: Python's {@code str.strip}, whose whitespace includes no-break spaces. */
    static final class TrimFilter implements Filter {
        @Override
        public String getName() {
            return "trim";
        }

        @Override
        public Object filter(@Nullable Object var, JinjavaInterpreter interpreter, String... args) {
            return Py.strip(str(var), args.length > 0 ? args[0] : null, true, true);
        }

        @Override
        public Object filter(@Nullable Object var, JinjavaInterpreter interpreter, Object[] args, Map<String, Object> kwargs) {
            Object chars = kwargs.containsKey("chars") ? kwargs.get("chars") : args.length > 0 ? args[0] : null;
            return Py.strip(str(var), chars == null ? null : chars.toString(), true, true);
        }
    }

    /**
     * Jinja2's {@code iterable} and {@code sequence} tests, under which a string is one too (Llama 3.1's template sends
     * a tool's string result through {@code tojson} because of it); Jinjava's say no for strings.
     */
    static final class PythonContainerTest implements ExpTest {
        private final String name;

        PythonContainerTest(String name) {
            this.name = name;
        }

        @Override
        public String getName() {
            return name;
        }

        @Override
        public boolean evaluate(@Nullable Object var, JinjavaInterpreter interpreter, Object... args) {
            return var instanceof CharSequence || var instanceof SafeString || var instanceof Iterable<?> || var instanceof Map<?, ?>
                    || (var != null && var.getClass().isArray()) || ("iterable".equals(name) && var instanceof Iterator<?>);
        }
    }

    /** Jinja2's {@code items} filter: a mapping's (key, value) pairs, in order. */
    static final class ItemsFilter implements Filter {
        @Override
        public String getName() {
            return "items";
        }

        @Override
        public Object filter(@Nullable Object var, JinjavaInterpreter interpreter, String... args) {
            List<Map.Entry<Object, Object>> entries = new ArrayList<>();
            if (var instanceof Map<?, ?> m) {
                m.forEach((k, v) -> entries.add(new AbstractMap.SimpleImmutableEntry<>(k, v)));
            }
            return entries;
        }
    }

    /** {@code {% generation %}...{% endgeneration %}}: transformers' assistant-mask marker, rendered as its body. */
    static final class GenerationTag implements Tag {
        private static final long serialVersionUID = 1L;

        @Override
        public String getName() {
            return "generation";
        }

        @Override
        public String getEndTagName() {
            return "endgeneration";
        }

        @Override
        public String interpret(TagNode tagNode, JinjavaInterpreter interpreter) {
            StringBuilder out = new StringBuilder();
            for (Node child : tagNode.getChildren()) {
                out.append(child.render(interpreter).getValue());
            }
            return out.toString();
        }
    }

    /** transformers' {@code tojson}: {@code json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)}. */
    static final class ToJsonFilter implements Filter {
        @Override
        public String getName() {
            return "tojson";
        }

        @Override
        public Object filter(@Nullable Object var, JinjavaInterpreter interpreter, String... args) {
            return filter(var, interpreter, (Object[]) args, Map.of());
        }

        @Override
        public Object filter(@Nullable Object var, JinjavaInterpreter interpreter, Object[] args, Map<String, Object> kwargs) {
            Object ensureAscii = kwargs.containsKey("ensure_ascii") ? kwargs.get("ensure_ascii") : args.length > 0 ? args[0] : false;
            Object indent = kwargs.containsKey("indent") ? kwargs.get("indent") : args.length > 1 ? args[1] : null;
            Object separators = kwargs.containsKey("separators") ? kwargs.get("separators") : args.length > 2 ? args[2] : null;
            Object sortKeys = kwargs.containsKey("sort_keys") ? kwargs.get("sort_keys") : args.length > 3 ? args[3] : false;
            return PyJson.dumps(var, truthy(ensureAscii), indent, separators, truthy(sortKeys));
        }

        private static boolean truthy(@Nullable Object o) {
            return o instanceof Boolean b ? b : o instanceof String s ? Boolean.parseBoolean(s) : o instanceof Number n && n.doubleValue() != 0;
        }
    }

    /** Python's {@code json.dumps} output for the values a template sees (maps, lists, strings, numbers, booleans, none). */
    static final class PyJson {
        private PyJson() {}

        static String dumps(@Nullable Object value, boolean ensureAscii, @Nullable Object indent, @Nullable Object separators,
                boolean sortKeys) {
            String indentStr = indent == null ? null
                    : indent instanceof Number n ? " ".repeat(Math.max(0, n.intValue())) : indent.toString();
            String itemSep = indentStr == null ? ", " : ",";
            String keySep = ": ";
            if (separators instanceof List<?> l && l.size() == 2) {
                itemSep = String.valueOf(l.get(0));
                keySep = String.valueOf(l.get(1));
            } else if (separators instanceof Object[] a && a.length == 2) {
                itemSep = String.valueOf(a[0]);
                keySep = String.valueOf(a[1]);
            }
            StringBuilder out = new StringBuilder();
            write(out, value, ensureAscii, indentStr, itemSep, keySep, sortKeys, 0);
            return out.toString();
        }

        private static void write(StringBuilder out, @Nullable Object v, boolean ascii, @Nullable String indent, String itemSep,
                String keySep, boolean sortKeys, int level) {
            if (v == null) {
                out.append("null");
            } else if (v instanceof Boolean b) {
                out.append(b ? "true" : "false");
            } else if (v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte || v instanceof BigInteger) {
                out.append(v);
            } else if (v instanceof BigDecimal bd) {
                out.append(floatRepr(bd.doubleValue()));
            } else if (v instanceof Double || v instanceof Float) {
                out.append(floatRepr(((Number) v).doubleValue()));
            } else if (v instanceof CharSequence || v instanceof SafeString || v instanceof Character) {
                string(out, v.toString(), ascii);
            } else if (v instanceof Map<?, ?> m) {
                if (m.isEmpty()) {
                    out.append("{}");
                    return;
                }
                Collection<? extends Map.Entry<?, ?>> entries = m.entrySet();
                if (sortKeys) {
                    List<Map.Entry<?, ?>> sorted = new ArrayList<>(entries);
                    sorted.sort((x, y) -> String.valueOf(x.getKey()).compareTo(String.valueOf(y.getKey())));
                    entries = sorted;
                }
                out.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : entries) {
                    if (!first) {
                        out.append(itemSep);
                    }
                    first = false;
                    newline(out, indent, level + 1);
                    Object k = e.getKey();
                    string(out, k instanceof String s ? s : k instanceof Boolean || k == null ? (k == null ? "null" : k.toString())
                            : k instanceof Double || k instanceof Float ? floatRepr(((Number) k).doubleValue()) : String.valueOf(k), ascii);
                    out.append(keySep);
                    write(out, e.getValue(), ascii, indent, itemSep, keySep, sortKeys, level + 1);
                }
                newline(out, indent, level);
                out.append('}');
            } else if (v instanceof Iterable<?> || v instanceof Object[]) {
                Iterator<?> it = v instanceof Iterable<?> i ? i.iterator() : List.of((Object[]) v).iterator();
                if (!it.hasNext()) {
                    out.append("[]");
                    return;
                }
                out.append('[');
                boolean first = true;
                while (it.hasNext()) {
                    if (!first) {
                        out.append(itemSep);
                    }
                    first = false;
                    newline(out, indent, level + 1);
                    write(out, it.next(), ascii, indent, itemSep, keySep, sortKeys, level + 1);
                }
                newline(out, indent, level);
                out.append(']');
            } else if (v instanceof Map.Entry<?, ?> e) {
                write(out, List.of(e.getKey(), e.getValue()), ascii, indent, itemSep, keySep, sortKeys, level);
            } else if (v instanceof Number n) {
                out.append(n);
            } else {
                string(out, v.toString(), ascii);
            }
        }

        private static void newline(StringBuilder out, @Nullable String indent, int level) {
            if (indent != null) {
                out.append('\n').append(indent.repeat(level));
            }
        }

        private static void string(StringBuilder out, String s, boolean ascii) {
            out.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"' -> out.append("\\\"");
                    case '\\' -> out.append("\\\\");
                    case '\n' -> out.append("\\n");
                    case '\r' -> out.append("\\r");
                    case '\t' -> out.append("\\t");
                    case '\b' -> out.append("\\b");
                    case '\f' -> out.append("\\f");
                    default -> {
                        if (c < 0x20 || (ascii && c > 0x7e)) {
                            out.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                        } else {
                            out.append(c);
                        }
                    }
                }
            }
            out.append('"');
        }

        /** Python's {@code repr(float)}: the shortest digits that round-trip, exponent form outside 1e-4 .. 1e16. */
        static String floatRepr(double d) {
            if (Double.isNaN(d)) {
                return "NaN";
            }
            if (Double.isInfinite(d)) {
                return d > 0 ? "Infinity" : "-Infinity";
            }
            if (d == 0) {
                return (1 / d < 0) ? "-0.0" : "0.0";
            }
            BigDecimal bd = new BigDecimal(Double.toString(d)).stripTrailingZeros(); // Java's shortest round-trip digits
            String digits = bd.unscaledValue().abs().toString();
            int exp = digits.length() - 1 - bd.scale(); // d = digits[0].digits[1..] x 10^exp
            String sign = d < 0 ? "-" : "";
            if (exp < -4 || exp >= 16) {
                String mant = digits.length() == 1 ? digits : digits.charAt(0) + "." + digits.substring(1);
                return sign + mant + "e" + (exp < 0 ? "-" : "+") + (Math.abs(exp) < 10 ? "0" : "") + Math.abs(exp);
            }
            if (exp < 0) {
                return sign + "0." + "0".repeat(-exp - 1) + digits;
            }
            if (digits.length() <= exp + 1) {
                return sign + digits + "0".repeat(exp + 1 - digits.length()) + ".0";
            }
            return sign + digits.substring(0, exp + 1) + "." + digits.substring(exp + 1);
        }
    }

    /** Python's {@code str} methods and indexing on Java strings, ahead of Jinjava's Java-bean method calls. */
    static final class PythonStringResolver extends ELResolver {
        @Override
        public @Nullable Object getValue(ELContext context, @Nullable Object base, @Nullable Object property) {
            // Jinjava hands an integer subscript over as its decimal text
            Long index = property instanceof Number n ? Long.valueOf(n.longValue())
                    : property instanceof String p && p.matches("-?\\d{1,9}") ? Long.valueOf(p) : null;
            if (base instanceof String s && index != null) {
                int len = s.codePointCount(0, s.length());
                long i = index;
                if (i < 0) {
                    i += len;
                }
                if (i >= 0 && i < len) {
                    context.setPropertyResolved(true);
                    return Character.toString(s.codePointAt(s.offsetByCodePoints(0, (int) i)));
                }
            }
            return null;
        }

        @Override
        public @Nullable Object invoke(ELContext context, @Nullable Object base, @Nullable Object method,
                Class<?> @Nullable [] paramTypes, @Nullable Object @Nullable [] params) {
            if (!(base instanceof String s) || !(method instanceof String name)) {
                return null;
            }
            Object[] p = params == null ? new Object[0] : params;
            Object result = Py.call(s, name, p);
            if (result != Py.NO_SUCH_METHOD) {
                context.setPropertyResolved(true);
                return result;
            }
            return null;
        }

        @Override
        public @Nullable Class<?> getType(ELContext context, @Nullable Object base, @Nullable Object property) {
            return null;
        }

        @Override
        public void setValue(ELContext context, @Nullable Object base, @Nullable Object property, @Nullable Object value) {
            // read-only: never resolves a write
        }

        @Override
        public boolean isReadOnly(ELContext context, @Nullable Object base, @Nullable Object property) {
            return true;
        }

        @Override
        public @Nullable Iterator<FeatureDescriptor> getFeatureDescriptors(ELContext context, @Nullable Object base) {
            return null;
        }

        @Override
        public @Nullable Class<?> getCommonPropertyType(ELContext context, @Nullable Object base) {
            return null;
        }
    }

    /** Python {@code str} semantics. */
    static final class Py {
        static final Object NO_SUCH_METHOD = new Object();

        private Py() {}

        static Object call(String s, String name, @Nullable Object[] p) {
            return switch (name) {
                case "strip" -> strip(s, arg(p, 0), true, true);
                case "lstrip" -> strip(s, arg(p, 0), true, false);
                case "rstrip" -> strip(s, arg(p, 0), false, true);
                case "startswith" -> affix(s, p.length > 0 ? p[0] : null, true);
                case "endswith" -> affix(s, p.length > 0 ? p[0] : null, false);
                case "upper" -> s.toUpperCase(Locale.ENGLISH);
                case "lower" -> s.toLowerCase(Locale.ENGLISH);
                case "title" -> title(s);
                case "capitalize" -> s.isEmpty() ? s : s.substring(0, 1).toUpperCase(Locale.ROOT) + s.substring(1).toLowerCase(Locale.ENGLISH);
                case "split" -> split(s, arg(p, 0), intArg(p, 1, -1));
                case "rsplit" -> rsplit(s, arg(p, 0), intArg(p, 1, -1));
                case "splitlines" -> new ArrayList<>(s.lines().toList());
                case "replace" -> replace(s, String.valueOf(p[0]), String.valueOf(p[1]), intArg(p, 2, -1));
                case "find" -> codePointIndex(s, s.indexOf(String.valueOf(p[0])));
                case "rfind" -> codePointIndex(s, s.lastIndexOf(String.valueOf(p[0])));
                case "count" -> count(s, String.valueOf(p[0]));
                case "join" -> join(s, p.length > 0 ? p[0] : null);
                case "isspace" -> !s.isEmpty() && s.codePoints().allMatch(Py::isSpace);
                case "isdigit" -> !s.isEmpty() && s.codePoints().allMatch(Character::isDigit);
                case "isalpha" -> !s.isEmpty() && s.codePoints().allMatch(Character::isLetter);
                case "isalnum" -> !s.isEmpty() && s.codePoints().allMatch(Character::isLetterOrDigit);
                case "isupper" -> s.codePoints().anyMatch(Character::isUpperCase) && s.codePoints().noneMatch(Character::isLowerCase);
                case "islower" -> s.codePoints().anyMatch(Character::isLowerCase) && s.codePoints().noneMatch(Character::isUpperCase);
                default -> NO_SUCH_METHOD;
            };
        }

        /** Python indexes strings by code point, Java by UTF-16 unit. */
        private static int codePointIndex(String s, int utf16Index) {
            return utf16Index < 0 ? utf16Index : s.codePointCount(0, utf16Index);
        }

        private static @Nullable String arg(@Nullable Object[] p, int i) {
            return p.length > i && p[i] != null ? p[i].toString() : null;
        }

        private static int intArg(@Nullable Object[] p, int i, int dflt) {
            return p.length > i && p[i] instanceof Number n ? n.intValue() : dflt;
        }

        static boolean isSpace(int cp) {
            return Character.isWhitespace(cp) || Character.isSpaceChar(cp) || cp == 0x85;
        }

        static String strip(String s, @Nullable String chars, boolean left, boolean right) {
            int start = 0;
            int end = s.length();
            if (left) {
                while (start < end && stripped(s.charAt(start), chars)) {
                    start++;
                }
            }
            if (right) {
                while (end > start && stripped(s.charAt(end - 1), chars)) {
                    end--;
                }
            }
            return s.substring(start, end);
        }

        private static boolean stripped(char c, @Nullable String chars) {
            return chars == null ? isSpace(c) : chars.indexOf(c) >= 0;
        }

        private static boolean affix(String s, @Nullable Object affix, boolean prefix) {
            if (affix instanceof Collection<?> options) {
                return options.stream().anyMatch(o -> affix(s, o, prefix));
            }
            String a = String.valueOf(affix);
            return prefix ? s.startsWith(a) : s.endsWith(a);
        }

        private static String title(String s) {
            StringBuilder out = new StringBuilder(s.length());
            boolean prevCased = false;
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                out.append(prevCased ? Character.toLowerCase(c) : Character.toUpperCase(c));
                prevCased = Character.isLetter(c);
            }
            return out.toString();
        }

        static List<String> split(String s, @Nullable String sep, int maxsplit) {
            List<String> parts = new ArrayList<>();
            if (sep == null) {
                int i = 0;
                int n = s.length();
                while (true) {
                    while (i < n && isSpace(s.charAt(i))) {
                        i++;
                    }
                    if (i >= n) {
                        break;
                    }
                    if (maxsplit >= 0 && parts.size() == maxsplit) {
                        parts.add(strip(s.substring(i), null, false, true));
                        break;
                    }
                    int j = i;
                    while (j < n && !isSpace(s.charAt(j))) {
                        j++;
                    }
                    parts.add(s.substring(i, j));
                    i = j;
                }
                return parts;
            }
            if (sep.isEmpty()) {
                throw new IllegalArgumentException("empty separator");
            }
            int i = 0;
            while (maxsplit < 0 || parts.size() < maxsplit) {
                int j = s.indexOf(sep, i);
                if (j < 0) {
                    break;
                }
                parts.add(s.substring(i, j));
                i = j + sep.length();
            }
            parts.add(s.substring(i));
            return parts;
        }

        private static List<String> rsplit(String s, @Nullable String sep, int maxsplit) {
            if (maxsplit < 0 || sep == null) {
                return split(s, sep, sep == null ? maxsplit : -1);
            }
            List<String> parts = new ArrayList<>();
            int end = s.length();
            while (parts.size() < maxsplit) {
                int j = s.lastIndexOf(sep, end - sep.length());
                if (j < 0) {
                    break;
                }
                parts.add(s.substring(j + sep.length(), end));
                end = j;
            }
            parts.add(s.substring(0, end));
            Collections.reverse(parts);
            return parts;
        }

        private static String replace(String s, String old, String now, int count) {
            if (count < 0) {
                return s.replace(old, now);
            }
            StringBuilder out = new StringBuilder();
            int i = 0;
            int done = 0;
            while (done < count && !old.isEmpty()) {
                int j = s.indexOf(old, i);
                if (j < 0) {
                    break;
                }
                out.append(s, i, j).append(now);
                i = j + old.length();
                done++;
            }
            return out.append(s.substring(i)).toString();
        }

        private static int count(String s, String sub) {
            if (sub.isEmpty()) {
                return s.length() + 1;
            }
            int n = 0;
            for (int i = s.indexOf(sub); i >= 0; i = s.indexOf(sub, i + sub.length())) {
                n++;
            }
            return n;
        }

        private static String join(String sep, @Nullable Object items) {
            List<String> parts = new ArrayList<>();
            if (items instanceof Iterable<?> it) {
                it.forEach(o -> parts.add(String.valueOf(o)));
            } else if (items instanceof Object[] a) {
                for (Object o : a) {
                    parts.add(String.valueOf(o));
                }
            } else if (items != null) {
                items.toString().codePoints().forEach(cp -> parts.add(new String(Character.toChars(cp))));
            }
            return String.join(sep, parts);
        }
    }
}
