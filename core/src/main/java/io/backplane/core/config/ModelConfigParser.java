package io.backplane.core.config;

import static io.backplane.core.config.ModelConfigValidator.error;
import static java.util.Objects.requireNonNull;

import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.EnumDescriptor;
import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.TextFormat;
import com.google.protobuf.TextFormatParseInfoTree;
import com.google.protobuf.TextFormatParseLocation;
import io.backplane.protocol.inference.ModelConfigProtos;
import io.backplane.protocol.inference.ModelDynamicBatching;
import io.backplane.protocol.inference.ModelInput;
import io.backplane.protocol.inference.ModelInstanceGroup;
import io.backplane.protocol.inference.ModelOutput;
import io.backplane.protocol.inference.ModelQueuePolicy;
import io.backplane.protocol.inference.ModelRateLimiter;
import io.backplane.protocol.inference.ModelVersionPolicy;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.config.ConfigNode;
import io.backplane.spi.config.EnsembleScheduling;
import io.backplane.spi.config.DynamicBatching;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.QueuePolicy;
import io.backplane.spi.config.RateLimiterConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.spi.config.TimeoutAction;
import io.backplane.spi.config.VersionPolicy;
import java.io.IOException;
import java.nio.charset.CharacterCodingException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads Triton {@code config.pbtxt} files with protobuf text-format semantics (protobuf-java's
 * {@link TextFormat} over Triton's {@code model_config.proto} from {@code backplane-protocol}), then
 * converts and checks them. Every problem is a {@link BackplaneException} INVALID_ARGUMENT that starts with
 * {@code <file>:<line>:<col>: } where the position is known and names the field; a Triton field that
 * Backplane does not support is reported as such, never ignored.
 */
public final class ModelConfigParser {
    /** The configuration file inside a model directory. */
    public static final String CONFIG_FILE = "config.pbtxt";

    private static final Logger LOG = LoggerFactory.getLogger(ModelConfigParser.class);

    /** Triton model_config.proto fields that Backplane does not support, per message type; any other field is supported. */
    private static final Map<String, Set<String>> UNSUPPORTED_TRITON_FIELDS = Map.of(
            "ModelConfig", Set.of("runtime", "batch_input", "batch_output",
                    "cc_model_filenames", "metric_tags", "model_operations", "model_repository_agents",
                    "model_metrics"),
            "ModelInput", Set.of("is_shape_tensor", "allow_ragged_batch", "is_non_linear_format_io"),
            "ModelOutput", Set.of("is_shape_tensor", "is_non_linear_format_io"),
            "ModelInstanceGroup", Set.of("secondary_devices", "profile", "passive", "host_policy"));

    /** The most of a config line the host's log shows with a parse error. */
    private static final int LOGGED_LINE_CHARS = 200;
    private static final Pattern FOUND = Pattern.compile("\\s*Found ['\"].*$", Pattern.DOTALL);
    private static final Pattern COULD_NOT_PARSE = Pattern.compile("^(Couldn't parse [A-Za-z ]+?): .*$", Pattern.DOTALL);
    private static final Pattern POSITION_PREFIX = Pattern.compile("^-?\\d+:-?\\d+: ");
    private static final Pattern UNKNOWN_FIELD = Pattern.compile("(\\d+):(\\d+):\\s*([A-Za-z0-9_.]+)\\.([A-Za-z0-9_]+)\\s*$");
    private static final Pattern FIELD_BEFORE_VALUE = Pattern.compile("([A-Za-z_][A-Za-z0-9_]*)\\s*:");
    private static final Pattern ENUM_TYPE = Pattern.compile("Enum type \"([A-Za-z0-9_.]+)\"");

    private static final Map<String, Descriptor> MESSAGES = new HashMap<>();
    private static final Map<String, EnumDescriptor> ENUMS = new HashMap<>();

    static {
        for (EnumDescriptor e : ModelConfigProtos.getDescriptor().getEnumTypes()) {
            ENUMS.put(e.getFullName(), e);
        }
        for (Descriptor d : ModelConfigProtos.getDescriptor().getMessageTypes()) {
            index(d);
        }
    }

    private static void index(Descriptor d) {
        MESSAGES.put(d.getFullName(), d);
        for (EnumDescriptor e : d.getEnumTypes()) {
            ENUMS.put(e.getFullName(), e);
        }
        for (Descriptor n : d.getNestedTypes()) {
            index(n);
        }
    }

    private ModelConfigParser() {
    }

    /** As {@link #parseModelDirectory(Path, BackendCatalog)} with no backend known ({@link BackendCatalog#NONE}). */
    public static ModelConfig parseModelDirectory(Path modelDir) {
        return parseModelDirectory(modelDir, BackendCatalog.NONE);
    }

    /**
     * Parses and checks {@code <modelDir>/config.pbtxt}, or infers a minimal config when the file is
     * absent: name = directory name, backend from the model file in the highest version folder, as
     * the installed backends declared in {@code catalog} (e.g. {@code model.py} → python). A
     * {@code platform} without {@code backend} takes the backend that declared the platform. A
     * {@code version_policy { specific {...} }} must name existing version folders.
     *
     * @throws BackplaneException INVALID_ARGUMENT for a bad or unreadable config; NOT_FOUND when
     *     {@code modelDir} is not a directory
     */
    public static ModelConfig parseModelDirectory(Path modelDir, BackendCatalog catalog) {
        if (!Files.isDirectory(modelDir)) {
            throw BackplaneException.notFound("model directory " + modelDir + " does not exist or is not a directory");
        }
        String dirName = modelDir.getFileName() == null ? modelDir.toString() : modelDir.getFileName().toString();
        Path file = modelDir.resolve(CONFIG_FILE);
        if (!Files.exists(file)) {
            return infer(modelDir, dirName, catalog);
        }
        if (!Files.isRegularFile(file)) {
            throw BackplaneException.invalid(file + ": is not a regular file; config.pbtxt must be a text file");
        }
        String text;
        try {
            text = Files.readString(file);
        } catch (CharacterCodingException e) {
            throw new BackplaneException(ErrorCode.INVALID_ARGUMENT, file + ": is not valid UTF-8 text; save it as UTF-8", e);
        } catch (IOException e) {
            throw new BackplaneException(ErrorCode.INVALID_ARGUMENT, file + ": cannot be read: " + e, e);
        }
        if (text.startsWith("\uFEFF")) {
            text = text.substring(1); // a byte-order mark from Windows editors; TextFormat would reject it
        }
        Parsed parsed = parseWithPositions(text, file.toString(), dirName, catalog, modelDir);
        checkSpecificVersionsExist(parsed.config(), parsed.at(), modelDir);
        return parsed.config();
    }

    /**
     * Parses and checks config text.
     *
     * @param text the content of a config.pbtxt
     * @param sourceName named in every error, usually the file path
     * @param expectedModelName the model directory name the config must carry (a config without
     *     {@code name} takes it); empty to accept any non-empty name
     * @throws BackplaneException INVALID_ARGUMENT naming {@code sourceName}, line, column and field
     */
    public static ModelConfig parse(String text, String sourceName, String expectedModelName) {
        return parse(text, sourceName, expectedModelName, BackendCatalog.NONE);
    }

    /** As {@link #parse(String, String, String)}, resolving platforms and backend-read sections through {@code catalog}. */
    public static ModelConfig parse(String text, String sourceName, String expectedModelName, BackendCatalog catalog) {
        return parseWithPositions(text, sourceName, expectedModelName, catalog, null).config();
    }

    /**
     * As {@link #parse(String, String, String, BackendCatalog)} for the config of the model in
     * {@code modelDir}: a config that names neither a backend nor a platform takes the backend of
     * the model file in the highest version folder, as a folder without config.pbtxt does (Triton's
     * auto-complete: a partial config, e.g. a repository-extension load whose config override holds
     * only {@code max_batch_size}, is completed from the model's files).
     */
    public static ModelConfig parse(String text, String sourceName, String expectedModelName, BackendCatalog catalog, Path modelDir) {
        return parseWithPositions(text, sourceName, expectedModelName, catalog, requireNonNull(modelDir, "modelDir is null")).config();
    }

    private record Parsed(ModelConfig config, SourcePositions at) {
    }

    private static Parsed parseWithPositions(String text, String source, String expectedName, BackendCatalog catalog, @Nullable Path modelDir) {
        try {
            return parseChecked(text, source, expectedName, catalog, modelDir);
        } catch (BackplaneException e) {
            throw ErrorText.bounded(e);
        }
    }

    private static Parsed parseChecked(String text, String source, String expectedName, BackendCatalog catalog, @Nullable Path modelDir) {
        RawConfigReader.Result raw = RawConfigReader.read(text);
        if (raw != null) {
            text = withoutBackendSections(text, raw, catalog);
        }
        TextFormatParseInfoTree.Builder tree = TextFormatParseInfoTree.builder();
        TextFormat.Parser parser = TextFormat.Parser.newBuilder()
                .setParseInfoTreeBuilder(tree)
                // Triton parses with C++ TextFormat, which rejects a non-repeated field given twice.
                .setSingularOverwritePolicy(TextFormat.Parser.SingularOverwritePolicy.FORBID_SINGULAR_OVERWRITES)
                .build();
        io.backplane.protocol.inference.ModelConfig.Builder builder = io.backplane.protocol.inference.ModelConfig.newBuilder();
        try {
            parser.merge(text, builder);
        } catch (TextFormat.ParseException e) {
            throw translate(e, text, source);
        }
        if (modelDir != null && builder.getBackend().isEmpty() && builder.getPlatform().isEmpty()) {
            backendFromFiles(modelDir, catalog).ifPresent(found -> {
                LOG.info("{} names neither a backend nor a platform; inferred backend '{}' from {}", source, found.backend(), found.file());
                builder.setBackend(found.backend());
            });
        }
        io.backplane.protocol.inference.ModelConfig proto = builder.build();
        TextFormatParseInfoTree built = tree.build();
        checkSupported(built, source);
        SourcePositions at = SourcePositions.of(source, proto, built);
        checkDuplicateMapKeys(proto, built, at);
        ModelConfig config = convert(proto, at, expectedName, catalog, raw == null ? ConfigNode.EMPTY : raw.tree());
        ModelConfigValidator.validate(config, at);
        ServingSections.check(proto, at);
        return new Parsed(config, at);
    }

    /**
     * Blanks the top-level sections that the model's backend declared it reads itself and that
     * Backplane does not model (a Triton field outside Backplane's subset, or a name Triton's schema
     * does not have), so the schema check accepts them; they stay in the raw view.
     */
    private static String withoutBackendSections(String text, RawConfigReader.Result raw, BackendCatalog catalog) {
        String backend = raw.tree().value("backend").orElse("");
        String platform = raw.tree().value("platform").orElse("");
        Set<String> declared = new java.util.HashSet<>(backend.isEmpty() ? Set.of() : catalog.configSections(backend));
        if (!platform.isEmpty()) {
            declared.addAll(catalog.configSections(platform));
        }
        if (declared.isEmpty()) {
            return text;
        }
        Descriptor schema = io.backplane.protocol.inference.ModelConfig.getDescriptor();
        Set<String> unsupported = UNSUPPORTED_TRITON_FIELDS.getOrDefault(schema.getName(), Set.of());
        List<RawConfigReader.Span> handled = raw.topLevel().stream().filter(span -> declared.contains(span.name())
                && (schema.findFieldByName(span.name()) == null || unsupported.contains(span.name()))).toList();
        return handled.isEmpty() ? text : RawConfigReader.blank(text, handled);
    }

    // ---- TextFormat errors ------------------------------------------------------------------------

    private static BackplaneException translate(TextFormat.ParseException e, String text, String source) {
        String message = POSITION_PREFIX.matcher(String.valueOf(e.getMessage())).replaceFirst("");
        String said = message;
        if (message.startsWith("Input contains unknown fields")) {
            List<String> problems = new ArrayList<>();
            for (String line : message.split("\n")) {
                Matcher m = UNKNOWN_FIELD.matcher(line);
                if (m.find()) {
                    problems.add(unknownField(source, m.group(1), m.group(2), m.group(3), m.group(4)));
                }
            }
            if (!problems.isEmpty()) {
                return new BackplaneException(ErrorCode.INVALID_ARGUMENT, String.join("\n", problems), e);
            }
        }
        int line = e.getLine();
        int column = e.getColumn();
        String where = line > 0 ? source + ":" + line + ":" + Math.max(column, 1) : source;
        String lineText = line > 0 ? lineOf(text, line) : "";
        StringBuilder out = new StringBuilder(where).append(": ");
        String field = isValueError(message) ? fieldBefore(lineText, column) : null;
        if (field != null) {
            out.append("field '").append(field).append("': ");
        } else {
            // Not a field's value: protobuf quotes the text it met ("Found 'x'", "Couldn't parse ...: <text>"), which
            // may be any file's content (a config.pbtxt linked to another file); the log gets it, with the line.
            message = COULD_NOT_PARSE.matcher(FOUND.matcher(message).replaceFirst("")).replaceFirst("$1.");
        }
        out.append(message);
        Matcher enumType = ENUM_TYPE.matcher(message);
        if (enumType.find() && ENUMS.containsKey(enumType.group(1))) {
            out.append(" Valid values: ").append(ENUMS.get(enumType.group(1)).getValues().stream()
                    .map(EnumValueDescriptor::getName).collect(Collectors.joining(", "))).append('.');
        }
        // The line itself goes to the host's log only: the file may be a link to one that is not a config.
        String detail = (said.equals(message) ? "" : "protobuf: " + ErrorText.abbreviate(said, LOGGED_LINE_CHARS) + "\n")
                + (lineText.isBlank() ? "" : "line " + line + ": " + ErrorText.abbreviate(lineText.strip(), LOGGED_LINE_CHARS));
        return new BackplaneException(ErrorCode.INVALID_ARGUMENT, out.toString(), detail, e);
    }

    private static String unknownField(String source, String line, String column, String typeFullName, String field) {
        String type = typeFullName.substring(typeFullName.lastIndexOf('.') + 1);
        String where = source + ":" + line + ":" + column + ": ";
        Set<String> unsupported = UNSUPPORTED_TRITON_FIELDS.getOrDefault(type, Set.of());
        Descriptor d = MESSAGES.get(typeFullName);
        String known = d == null ? "" : "; fields Backplane accepts in " + type + ": "
                + d.getFields().stream().map(FieldDescriptor::getName).filter(n -> !unsupported.contains(n)).collect(Collectors.joining(", "));
        return where + "field '" + field + "' is unknown in " + type + " (not a Triton model configuration field); check the spelling" + known;
    }

    // ---- Triton fields Backplane does not support ----------------------------------------------------

    private record Unsupported(TextFormatParseLocation at, String message) {
    }

    /**
     * The proto is Triton's whole schema, so a Triton field Backplane does not model parses; this
     * walk over what the text actually wrote reports each one, in file order, with its position.
     */
    private static void checkSupported(TextFormatParseInfoTree tree, String source) {
        List<Unsupported> found = new ArrayList<>();
        collectUnsupported(io.backplane.protocol.inference.ModelConfig.getDescriptor(), tree, source, found);
        if (!found.isEmpty()) {
            found.sort(Comparator.comparingInt((Unsupported u) -> u.at().getLine()).thenComparingInt(u -> u.at().getColumn()));
            throw BackplaneException.invalid(found.stream().map(Unsupported::message).collect(Collectors.joining("\n")));
        }
    }

    private static void collectUnsupported(Descriptor type, TextFormatParseInfoTree tree, String source, List<Unsupported> out) {
        Set<String> unsupported = UNSUPPORTED_TRITON_FIELDS.getOrDefault(type.getName(), Set.of());
        for (FieldDescriptor f : type.getFields()) {
            if (unsupported.contains(f.getName())) {
                for (TextFormatParseLocation l : tree.getLocations(f)) {
                    // TextFormatParseLocation is zero-based; editors and ParseException are one-based.
                    out.add(new Unsupported(l, source + ":" + (l.getLine() + 1) + ":" + (l.getColumn() + 1) + ": field '" + f.getName()
                            + "' is not supported by Backplane (Triton " + type.getName() + "." + f.getName()
                            + "); remove it, or serve this model with Triton"));
                }
            } else if (f.getJavaType() == FieldDescriptor.JavaType.MESSAGE && !f.isMapField()) {
                for (TextFormatParseInfoTree nested : tree.getNestedTrees(f)) {
                    collectUnsupported(f.getMessageType(), nested, source, out);
                }
            }
        }
    }

    private static boolean isValueError(String message) {
        return message.startsWith("Couldn't parse") || message.startsWith("Enum type") || message.startsWith("Expected integer")
                || message.startsWith("Expected string") || message.startsWith("Expected double") || message.startsWith("Expected float")
                || message.startsWith("Expected \"true\"") || message.startsWith("Invalid");
    }

    private static String lineOf(String text, int oneBasedLine) {
        String[] lines = text.split("\r?\n", -1);
        return oneBasedLine <= lines.length ? lines[oneBasedLine - 1] : "";
    }

    private static @Nullable String fieldBefore(String lineText, int oneBasedColumn) {
        String prefix = lineText.substring(0, Math.clamp(oneBasedColumn - 1, 0, lineText.length()));
        Matcher m = FIELD_BEFORE_VALUE.matcher(prefix);
        String last = null;
        while (m.find()) {
            last = m.group(1);
        }
        return last;
    }

    private static void checkDuplicateMapKeys(io.backplane.protocol.inference.ModelConfig proto, TextFormatParseInfoTree tree,
            SourcePositions at) {
        FieldDescriptor parameters = io.backplane.protocol.inference.ModelConfig.getDescriptor().findFieldByName("parameters");
        int parsed = tree.getLocations(parameters).size();
        if (parsed > proto.getParametersCount()) {
            throw error(at.at("parameters"), "parameters", parsed + " entries name only " + proto.getParametersCount()
                    + " distinct keys " + new TreeSet<>(proto.getParametersMap().keySet()) + "; give each key once");
        }
        if (proto.hasDynamicBatching()) {
            FieldDescriptor dbField = io.backplane.protocol.inference.ModelConfig.getDescriptor().findFieldByName("dynamic_batching");
            FieldDescriptor pqp = ModelDynamicBatching.getDescriptor().findFieldByName("priority_queue_policy");
            if (!tree.getNestedTrees(dbField).isEmpty()) {
                int entries = tree.getNestedTree(dbField, 0).getLocations(pqp).size();
                int distinct = proto.getDynamicBatching().getPriorityQueuePolicyCount();
                if (entries > distinct) {
                    throw error(at.at("dynamic_batching.priority_queue_policy"), "dynamic_batching.priority_queue_policy", entries
                            + " entries name only " + distinct + " distinct levels " + new TreeSet<>(
                                    proto.getDynamicBatching().getPriorityQueuePolicyMap().keySet()) + "; give each level once");
                }
            }
        }
    }

    // ---- conversion to the SPI records -------------------------------------------------------------

    private static ModelConfig convert(io.backplane.protocol.inference.ModelConfig m, SourcePositions at, String expectedName, BackendCatalog catalog,
            ConfigNode raw) {
        String name = m.getName();
        if (name.isEmpty()) {
            if (expectedName.isEmpty()) {
                throw error(at.source(), "name", "the config has no name; add name: \"<model directory name>\"");
            }
            name = expectedName;
        } else if (!expectedName.isEmpty() && !name.equals(expectedName)) {
            throw error(at.at("name"), "name", "model name '" + name + "' does not match its directory name '" + expectedName
                    + "'; set name: \"" + expectedName + "\" or rename the directory");
        }
        String backend = m.getBackend();
        if (!m.getPlatform().isEmpty() && !EnsembleScheduling.PLATFORM.equals(m.getPlatform())) { // the core schedules ensembles
            java.util.Optional<String> serving = catalog.backendForPlatform(m.getPlatform());
            if (backend.isEmpty() && serving.isEmpty() && catalog.knowsEveryBackend()) {
                throw error(at.at("platform"), "platform", "'" + m.getPlatform() + "' is a platform no installed backend serves; name a backend"
                        + " with backend: \"...\", or install one that declares this platform");
            }
            // A platform-only config keeps its backend empty: the core finds the backend by the platform, and the
            // backend's auto-complete may name itself as Triton does (the cpu backend writes "onnxruntime").
            if (!backend.isEmpty() && serving.isPresent() && !serving.get().equals(catalog.canonicalName(backend))) {
                throw error(at.at("backend"), "backend", "backend '" + backend + "' contradicts platform '" + m.getPlatform()
                        + "' (served by backend '" + serving.get() + "'); remove one of them");
            }
        }
        if (m.getMaxBatchSize() < 0) {
            throw error(at.at("max_batch_size"), "max_batch_size", "max_batch_size " + m.getMaxBatchSize()
                    + " is negative; use 0 for a model that does not batch, or the largest batch size");
        }
        ModelConfig.Builder b = ModelConfig.builder(name).platform(m.getPlatform()).backend(backend).maxBatchSize(m.getMaxBatchSize())
                .decoupled(m.getModelTransactionPolicy().getDecoupled()).defaultModelFilename(m.getDefaultModelFilename()).raw(raw);
        for (int i = 0; i < m.getInputCount(); i++) {
            ModelInput in = m.getInput(i);
            String path = "input[" + i + "]";
            DataType type = dataType(in.getDataTypeValue(), in.getName(), path, at);
            List<Long> reshape = in.hasReshape() ? in.getReshape().getShapeList() : null;
            b.input(construct(() -> TensorConfig.builder(in.getName(), type).dims(in.getDimsList()).reshape(reshape).optional(in.getOptional()).build(), at.at(path), "input"));
        }
        for (int i = 0; i < m.getOutputCount(); i++) {
            ModelOutput out = m.getOutput(i);
            String path = "output[" + i + "]";
            DataType type = dataType(out.getDataTypeValue(), out.getName(), path, at);
            List<Long> reshape = out.hasReshape() ? out.getReshape().getShapeList() : null;
            b.output(construct(() -> TensorConfig.builder(out.getName(), type).dims(out.getDimsList()).reshape(reshape).build(), at.at(path), "output"));
        }
        for (int i = 0; i < m.getInstanceGroupCount(); i++) {
            b.instanceGroup(instanceGroup(m.getInstanceGroup(i), name, i, at));
        }
        if (m.hasDynamicBatching()) {
            b.dynamicBatching(dynamicBatching(m.getDynamicBatching(), at));
        }
        if (m.hasSequenceBatching()) {
            b.sequenceBatching(SequenceBatchingConfig.convert(m.getSequenceBatching(), at));
        }
        if (m.hasVersionPolicy()) {
            b.versionPolicy(versionPolicy(m.getVersionPolicy(), at));
        }
        for (Map.Entry<String, io.backplane.protocol.inference.ModelParameter> p : m.getParametersMap().entrySet()) {
            b.parameter(p.getKey(), p.getValue().getStringValue());
        }
        return construct(b::build, at.source(), "model");
    }

    static DataType dataType(int number, String tensor, String path, SourcePositions at) {
        io.backplane.protocol.inference.DataType t = io.backplane.protocol.inference.DataType.forNumber(number);
        String where = at.at(path + ".data_type");
        if (t == null) {
            throw error(where, "data_type", "tensor '" + tensor + "': data_type " + number + " is not a Triton data type; use a name such as TYPE_FP32");
        }
        return switch (t) {
            case TYPE_INVALID, UNRECOGNIZED -> throw error(where, "data_type", "tensor '" + tensor
                    + "' has no data_type (TYPE_INVALID); set e.g. data_type: TYPE_FP32");
            case TYPE_BOOL -> DataType.BOOL;
            case TYPE_UINT8 -> DataType.UINT8;
            case TYPE_UINT16 -> DataType.UINT16;
            case TYPE_UINT32 -> DataType.UINT32;
            case TYPE_UINT64 -> DataType.UINT64;
            case TYPE_INT8 -> DataType.INT8;
            case TYPE_INT16 -> DataType.INT16;
            case TYPE_INT32 -> DataType.INT32;
            case TYPE_INT64 -> DataType.INT64;
            case TYPE_FP16 -> DataType.FP16;
            case TYPE_FP32 -> DataType.FP32;
            case TYPE_FP64 -> DataType.FP64;
            case TYPE_STRING -> DataType.BYTES;
            case TYPE_BF16 -> DataType.BF16;
        };
    }

    private static InstanceGroup instanceGroup(ModelInstanceGroup g, String modelName, int index, SourcePositions at) {
        String path = "instance_group[" + index + "]";
        if (g.hasCount() && g.getCount() < 1) {
            throw error(at.at(path + ".count"), "instance_group.count", "count " + g.getCount() + " must be ≥ 1; omit it for one instance");
        }
        InstanceKind kind = switch (g.getKind()) {
            case KIND_AUTO -> InstanceKind.AUTO;
            case KIND_GPU -> InstanceKind.GPU;
            case KIND_CPU -> InstanceKind.CPU;
            case KIND_MODEL -> InstanceKind.MODEL;
            case UNRECOGNIZED -> throw error(at.at(path + ".kind"), "instance_group.kind", "kind " + g.getKindValue()
                    + " is not one of KIND_AUTO, KIND_GPU, KIND_CPU, KIND_MODEL");
        };
        // Triton names an unnamed group <model name>_<group number>.
        String name = g.getName().isEmpty() ? modelName + "_" + index : g.getName();
        int count = g.hasCount() ? g.getCount() : 1;
        RateLimiterConfig limiter = g.hasRateLimiter() ? rateLimiter(g.getRateLimiter(), path + ".rate_limiter", at) : null;
        return construct(() -> InstanceGroup.builder(name).count(count).kind(kind).gpus(g.getGpusList()).rateLimiter(limiter).build(), at.at(path),
                "instance_group");
    }

    /** Triton's {@code rate_limiter}: resources with a name and a count, each global or per device, and a priority. */
    private static RateLimiterConfig rateLimiter(ModelRateLimiter r, String path, SourcePositions at) {
        List<RateLimiterConfig.Resource> resources = new ArrayList<>();
        for (int i = 0; i < r.getResourcesCount(); i++) {
            ModelRateLimiter.Resource res = r.getResources(i);
            String p = path + ".resources[" + i + "]";
            int count = smallInt(Integer.toUnsignedLong(res.getCount()), p + ".count", at);
            resources.add(construct(() -> RateLimiterConfig.Resource.of(res.getName(), res.getGlobal(), count), at.at(p), "rate_limiter.resources"));
        }
        int priority = smallInt(Integer.toUnsignedLong(r.getPriority()), path + ".priority", at);
        return construct(() -> RateLimiterConfig.of(resources, priority), at.at(path), "instance_group.rate_limiter");
    }

    private static DynamicBatching dynamicBatching(ModelDynamicBatching d, SourcePositions at) {
        String p = "dynamic_batching.";
        long delay = d.getMaxQueueDelayMicroseconds();
        if (delay < 0) {
            throw error(at.at(p + "max_queue_delay_microseconds"), p + "max_queue_delay_microseconds", Long.toUnsignedString(delay)
                    + " is too large; use at most " + Long.MAX_VALUE);
        }
        int levels = smallInt(d.getPriorityLevels(), p + "priority_levels", at);
        int defaultLevel = smallInt(d.getDefaultPriorityLevel(), p + "default_priority_level", at);
        QueuePolicy defaultPolicy = d.hasDefaultQueuePolicy() ? queuePolicy(d.getDefaultQueuePolicy(), p + "default_queue_policy", at)
                : QueuePolicy.DEFAULT;
        Map<Integer, QueuePolicy> perLevel = new HashMap<>();
        for (Map.Entry<Long, ModelQueuePolicy> e : d.getPriorityQueuePolicyMap().entrySet()) {
            String path = p + "priority_queue_policy";
            int level = smallInt(e.getKey(), path, at);
            perLevel.put(level, queuePolicy(e.getValue(), path, at));
        }
        return construct(() -> DynamicBatching.builder().preferredBatchSizes(d.getPreferredBatchSizeList()).maxQueueDelayMicros(delay)
                .preserveOrdering(d.getPreserveOrdering()).priorityLevels(levels).defaultPriorityLevel(defaultLevel).defaultQueuePolicy(defaultPolicy)
                .priorityQueuePolicy(perLevel).build(), at.at("dynamic_batching"), "dynamic_batching");
    }

    private static QueuePolicy queuePolicy(ModelQueuePolicy q, String path, SourcePositions at) {
        TimeoutAction action = switch (q.getTimeoutAction()) {
            case REJECT -> TimeoutAction.REJECT;
            case DELAY -> TimeoutAction.DELAY;
            case UNRECOGNIZED -> throw error(at.at(path + ".timeout_action"), path + ".timeout_action", "timeout_action "
                    + q.getTimeoutActionValue() + " is not REJECT or DELAY");
        };
        long timeout = q.getDefaultTimeoutMicroseconds();
        if (timeout < 0) {
            throw error(at.at(path + ".default_timeout_microseconds"), path + ".default_timeout_microseconds",
                    Long.toUnsignedString(timeout) + " is too large; use at most " + Long.MAX_VALUE);
        }
        int maxQueue = q.getMaxQueueSize();
        if (maxQueue < 0) {
            throw error(at.at(path + ".max_queue_size"), path + ".max_queue_size", Integer.toUnsignedString(maxQueue)
                    + " is too large; use at most " + Integer.MAX_VALUE);
        }
        return construct(() -> QueuePolicy.of(action, timeout, q.getAllowTimeoutOverride(), maxQueue), at.at(path), path);
    }

    private static VersionPolicy versionPolicy(ModelVersionPolicy v, SourcePositions at) {
        return switch (v.getPolicyChoiceCase()) {
            case LATEST -> {
                int n = v.getLatest().getNumVersions();
                if (n < 1) {
                    throw error(at.at("version_policy.latest"), "version_policy.latest.num_versions", "num_versions "
                            + Integer.toUnsignedString(n) + " must be between 1 and " + Integer.MAX_VALUE);
                }
                yield new VersionPolicy.Latest(n);
            }
            case ALL -> new VersionPolicy.All();
            case SPECIFIC -> {
                if (v.getSpecific().getVersionsCount() == 0) {
                    throw error(at.at("version_policy.specific"), "version_policy.specific.versions",
                            "specific lists no versions; add versions: [ 1 ] or use latest/all");
                }
                yield new VersionPolicy.Specific(v.getSpecific().getVersionsList());
            }
            case POLICYCHOICE_NOT_SET -> VersionPolicy.DEFAULT;
        };
    }

    private static int smallInt(long unsigned, String field, SourcePositions at) {
        if (unsigned < 0 || unsigned > Integer.MAX_VALUE) {
            throw error(at.at(field), field, Long.toUnsignedString(unsigned) + " is too large; use at most " + Integer.MAX_VALUE);
        }
        return (int) unsigned;
    }

    /** Runs a record constructor, turning its range checks into located config errors. */
    static <T> T construct(Supplier<T> constructor, String where, String field) {
        try {
            return constructor.get();
        } catch (IllegalArgumentException | NullPointerException e) {
            throw new BackplaneException(ErrorCode.INVALID_ARGUMENT, where + ": field '" + field + "': " + e.getMessage(), e);
        }
    }

    // ---- directories -------------------------------------------------------------------------------

    private static void checkSpecificVersionsExist(ModelConfig c, SourcePositions at, Path modelDir) {
        if (!(c.versionPolicy() instanceof VersionPolicy.Specific s)) {
            return;
        }
        List<Long> available = VersionFolders.scan(modelDir).versions();
        List<Long> missing = s.versions().stream().filter(v -> !available.contains(v)).toList();
        if (!missing.isEmpty()) {
            throw error(at.at("version_policy.specific"), "version_policy.specific.versions", "version(s) " + missing
                    + " have no version folder in " + modelDir + "; existing version folders: " + available
                    + "; create the folder or remove the version");
        }
    }

    private static ModelConfig infer(Path modelDir, String dirName, BackendCatalog catalog) {
        List<Long> versions = VersionFolders.scan(modelDir).versions();
        Path missing = modelDir.resolve(CONFIG_FILE);
        if (versions.isEmpty()) {
            throw BackplaneException.invalid(missing + ": not found, and " + modelDir
                    + " has no numeric version folder to infer a config from; add a config.pbtxt and a version folder such as 1/");
        }
        Path versionDir = modelDir.resolve(Long.toString(versions.getLast()));
        List<String> files = new ArrayList<>();
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(versionDir)) {
            entries.forEach(p -> files.add(p.getFileName().toString()));
        } catch (IOException e) {
            throw new BackplaneException(ErrorCode.INVALID_ARGUMENT, "cannot list " + versionDir + ": " + e, e);
        }
        Map<String, String> byFile = catalog.modelFileBackends();
        Optional<Found> found = backendIn(versionDir, files, byFile);
        if (found.isPresent()) {
            ModelConfig c = ModelConfig.builder(dirName).backend(found.get().backend()).build();
            ModelConfigValidator.validate(c, missing.toString());
            LOG.info("{} has no {}; inferred backend '{}' from {}", modelDir, CONFIG_FILE, found.get().backend(), found.get().file());
            return c;
        }
        files.sort(null);
        throw BackplaneException.invalid(missing + ": not found, and " + versionDir + " holds none of the model files the installed backends"
                + " declare " + byFile.keySet() + " (found " + files + "); add a config.pbtxt naming the backend");
    }

    /** A backend and the model file it was inferred from. */
    private record Found(String backend, Path file) {
    }

    /** The backend whose declared model file is in the highest version folder of {@code modelDir}, if any. */
    private static Optional<Found> backendFromFiles(Path modelDir, BackendCatalog catalog) {
        List<Long> versions = VersionFolders.scan(modelDir).versions();
        if (versions.isEmpty()) {
            return Optional.empty();
        }
        Path versionDir = modelDir.resolve(Long.toString(versions.getLast()));
        List<String> files = new ArrayList<>();
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(versionDir)) {
            entries.forEach(p -> files.add(p.getFileName().toString()));
        } catch (IOException e) {
            return Optional.empty(); // the validator's error names what to add
        }
        return backendIn(versionDir, files, catalog.modelFileBackends());
    }

    private static Optional<Found> backendIn(Path versionDir, List<String> files, Map<String, String> byFile) {
        for (Map.Entry<String, String> e : byFile.entrySet()) {
            if (files.contains(e.getKey())) {
                return Optional.of(new Found(e.getValue(), versionDir.resolve(e.getKey())));
            }
        }
        return Optional.empty();
    }
}
