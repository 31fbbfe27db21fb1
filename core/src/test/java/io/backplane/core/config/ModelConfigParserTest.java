package io.backplane.core.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.config.ConfigNode;
import io.backplane.spi.config.DynamicBatching;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.QueuePolicy;
import io.backplane.spi.config.TensorConfig;
import io.backplane.spi.config.TimeoutAction;
import io.backplane.spi.config.VersionPolicy;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.junit.jupiter.api.Test;

class ModelConfigParserTest {
    static final BackendCatalog CATALOG = io.backplane.core.testing.TestCatalog.CATALOG;

    static Path triton(String model) {
        try {
            return Path.of(Objects.requireNonNull(ModelConfigParserTest.class.getResource("/repos/triton/" + model)).toURI());
        } catch (URISyntaxException e) {
            throw new AssertionError(e);
        }
    }

    private static BackplaneException invalid(String text) {
        BackplaneException e = assertThrows(BackplaneException.class, () -> ModelConfigParser.parse(text, "m/config.pbtxt", "m"));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
        return e;
    }

    private static void assertContains(String message, String... parts) {
        for (String p : parts) {
            assertTrue(message.contains(p), () -> "expected '" + p + "' in: " + message);
        }
    }

    @Test
    void parse_unparseableLine_errorNamesFileLineColumn_theLineGoesToTheLogDetailOnly() {
        // a config.pbtxt that is really another file (a link to /etc/passwd): its content must not reach a client
        BackplaneException e = assertThrows(BackplaneException.class,
                () -> ModelConfigParser.parse("name: \"m\"\nroot x:0:0:secret-value:/root:/bin/bash\n", "/repo/m/config.pbtxt", "m"));

        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().startsWith("/repo/m/config.pbtxt:2:"), e.getMessage());
        assertFalse(e.getMessage().contains("secret-value"), e.getMessage());
        BackplaneException found = assertThrows(BackplaneException.class,
                () -> ModelConfigParser.parse("name: \"m\"\nsecret-value-2:x\n", "/repo/m/config.pbtxt", "m"));
        assertFalse(found.getMessage().contains("secret-value-2"), "protobuf's 'Found ...' quotes the file: " + found.getMessage());
        assertTrue(found.forLog().contains("secret-value-2"), found.forLog());

        assertTrue(String.valueOf(e.logDetail()).contains("line 2: root x:0:0:secret-value"), String.valueOf(e.logDetail()));
        assertTrue(e.forLog().contains("secret-value"), "the host's log keeps the line");
    }

    @Test
    void parse_megabyteValue_errorQuotesItsStartAndLengthOnly() {
        String huge = "v".repeat(1 << 20);
        BackplaneException e = assertThrows(BackplaneException.class,
                () -> ModelConfigParser.parse("name: \"" + huge + "\"\nbackend: \"python\"\n", "config.pbtxt", "m"));

        assertTrue(e.getMessage().length() < 5_000, "error length " + e.getMessage().length());
        assertTrue(e.forLog().length() < 10_000, "log line length " + e.forLog().length());
        assertTrue(e.getMessage().contains("more characters)"), e.getMessage());
    }

    @Test
    void parse_megabyteLineThatFailsToParse_logDetailIsCut() {
        String line = "max_batch_size: " + "9".repeat(1 << 20);
        BackplaneException e = assertThrows(BackplaneException.class, () -> ModelConfigParser.parse(line + "\n", "config.pbtxt", "m"));

        assertTrue(e.forLog().length() < 10_000, "log line length " + e.forLog().length());
    }

    @Test
    void parseModelDirectory_tritonAddSub_twoInputsTwoOutputsPythonCpu() {
        ModelConfig c = ModelConfigParser.parseModelDirectory(triton("add_sub"));

        assertEquals("add_sub", c.name());
        assertEquals("python", c.backend());
        assertEquals("", c.platform());
        assertEquals(0, c.maxBatchSize());
        assertEquals(List.of(TensorConfig.of("INPUT0", DataType.FP32, 4), TensorConfig.of("INPUT1", DataType.FP32, 4)), c.inputs());
        assertEquals(List.of(TensorConfig.of("OUTPUT0", DataType.FP32, 4), TensorConfig.of("OUTPUT1", DataType.FP32, 4)), c.outputs());
        assertEquals(List.of(InstanceGroup.of("add_sub_0", 1, InstanceKind.CPU, List.of())), c.instanceGroups());
        assertNull(c.dynamicBatching());
        assertFalse(c.decoupled());
        assertEquals(VersionPolicy.DEFAULT, c.versionPolicy());
    }

    @Test
    void parseModelDirectory_tritonDecoupledRepeat_decoupledWithVariableDims() {
        ModelConfig c = ModelConfigParser.parseModelDirectory(triton("repeat_int32"));

        assertTrue(c.decoupled());
        assertEquals(List.of("IN", "DELAY", "WAIT"), c.inputs().stream().map(TensorConfig::name).toList());
        assertEquals(TensorConfig.of("IN", DataType.INT32, -1), c.inputs().getFirst());
        assertEquals(TensorConfig.of("DELAY", DataType.UINT32, -1), c.inputs().get(1));
        assertEquals(List.of(TensorConfig.of("OUT", DataType.INT32, 1), TensorConfig.of("IDX", DataType.UINT32, 1)), c.outputs());
    }

    @Test
    void parseModelDirectory_tritonDecoupledSquare_decoupledTrueCapitalised() {
        ModelConfig c = ModelConfigParser.parseModelDirectory(triton("square_int32"));

        assertTrue(c.decoupled());
        assertEquals(List.of(TensorConfig.of("IN", DataType.INT32, 1)), c.inputs());
    }

    @Test
    void parseModelDirectory_onnxPlatform_keepsPlatformAndReshape() {
        ModelConfig c = ModelConfigParser.parseModelDirectory(triton("densenet_onnx"), CATALOG);

        assertEquals("onnxruntime_onnx", c.platform());
        assertEquals("", c.backend(), "the core finds the backend by the platform; the backend's auto-complete names itself");
        assertEquals(TensorConfig.builder("data_0", DataType.FP32).dims(3, 224, 224).reshape(List.of(1L, 3L, 224L, 224L)).build(),
                c.inputs().getFirst());
        assertEquals(List.of(1L, 1000L, 1L, 1L), c.outputs().getFirst().reshape());
    }

    @Test
    void parseModelDirectory_everyDynamicBatchingField_allConverted() {
        ModelConfig c = ModelConfigParser.parseModelDirectory(triton("batched"));

        DynamicBatching db = Objects.requireNonNull(c.dynamicBatching());
        assertEquals(List.of(4, 8), db.preferredBatchSizes());
        assertEquals(100, db.maxQueueDelayMicros());
        assertTrue(db.preserveOrdering());
        assertEquals(2, db.priorityLevels());
        assertEquals(1, db.defaultPriorityLevel());
        assertEquals(QueuePolicy.of(TimeoutAction.DELAY, 5000, true, 32), db.defaultQueuePolicy());
        assertEquals(Map.of(2, QueuePolicy.of(TimeoutAction.REJECT, 1000, false, 8)), db.priorityQueuePolicy());
        assertEquals(db.defaultQueuePolicy(), db.policyFor(1));
        assertEquals(16, c.maxBatchSize());
        assertEquals(TensorConfig.builder("X", DataType.FP32).dims(-1).optional(true).build(), c.input("X"));
        assertEquals(TensorConfig.builder("S", DataType.BYTES).dims(1).reshape(List.of()).build(), c.input("S"));
        assertEquals(TensorConfig.of("Y", DataType.BF16, -1, 2), c.output("Y"));
        assertEquals(List.of(InstanceGroup.of("on_gpus", 2, InstanceKind.GPU, List.of(0, 1)),
                InstanceGroup.of("batched_1", 3, InstanceKind.CPU, List.of())), c.instanceGroups());
        assertEquals(7, c.instanceCount());
        assertEquals(Map.of("EXECUTION_ENV_PATH", "$$TRITON_MODEL_DIRECTORY/env.tar.gz", "mode", "fast"), c.parameters());
        assertEquals("model.py", c.defaultModelFilename());
        assertEquals(new VersionPolicy.All(), c.versionPolicy());
    }

    @Test
    void parse_queuePolicyWithoutTimeoutAction_defaultsToReject() {
        ModelConfig c = ModelConfigParser.parse("""
                name: "m" backend: "python" max_batch_size: 4
                dynamic_batching { default_queue_policy { max_queue_size: 3 } }
                """, "m/config.pbtxt", "m");

        assertEquals(QueuePolicy.of(TimeoutAction.REJECT, 0, false, 3), Objects.requireNonNull(c.dynamicBatching()).defaultQueuePolicy());
    }

    @Test
    void parse_tritonDefaults_noNameTakesDirectoryNameAndLatestOne() {
        ModelConfig c = ModelConfigParser.parse("backend: \"python\"", "m/config.pbtxt", "m");

        assertEquals("m", c.name());
        assertEquals(new VersionPolicy.Latest(1), c.versionPolicy());
        assertEquals(1, c.instanceCount());
        assertTrue(c.instanceGroups().isEmpty());
        assertTrue(c.parameters().isEmpty());
    }

    @Test
    void parse_versionPolicies_latestAndSpecific() {
        assertEquals(new VersionPolicy.Latest(3),
                ModelConfigParser.parse("backend: \"python\" version_policy: { latest: { num_versions: 3 } }", "m/config.pbtxt", "m")
                        .versionPolicy());
        assertEquals(new VersionPolicy.Specific(List.of(1L, 3L)),
                ModelConfigParser.parse("backend: \"python\" version_policy: { specific: { versions: [ 1, 3 ] } }", "m/config.pbtxt", "m")
                        .versionPolicy());
    }

    @Test
    void parse_syntaxError_namesFileLineAndColumn() {
        String m = invalid("""
                name: "m"
                backend: "python"
                input [ { name: "a" data_type: TYPE_FP32 dims: [ 1 ]
                """).getMessage();

        assertTrue(m.startsWith("m/config.pbtxt:4:"), m);
    }

    @Test
    void parse_unknownField_namesFileLineAndFieldAndSuggestsKnownFields() {
        String m = invalid("""
                name: "m"
                backend: "python"
                max_batch_sise: 4
                """).getMessage();

        assertContains(m, "m/config.pbtxt:3:1: ", "field 'max_batch_sise' is unknown in ModelConfig", "max_batch_size");
    }

    @Test
    void parse_unsupportedTritonField_saysNotSupportedByBackplane() {
        String m = invalid("""
                name: "m"
                backend: "python"
                max_batch_size: 4
                model_repository_agents {
                  agents [ { name: "checksum" } ]
                }
                """).getMessage();

        assertContains(m, "m/config.pbtxt:4:1: ", "field 'model_repository_agents' is not supported by Backplane");
    }

    @Test
    void parse_unsupportedNestedFields_eachReportedWithPosition() {
        String m = invalid("""
                name: "m"
                backend: "python"
                input [ { name: "a" data_type: TYPE_FP32 is_shape_tensor: true dims: [ 3 ] } ]
                model_operations { op_library_filename: [ "libx.so" ] }
                """).getMessage();

        assertContains(m, "m/config.pbtxt:3:42: field 'is_shape_tensor' is not supported by Backplane",
                "m/config.pbtxt:4:1: field 'model_operations' is not supported by Backplane");
    }

    @Test
    void parse_badEnumValue_namesFieldAndListsValidValues() {
        String m = invalid("""
                name: "m"
                backend: "python"
                input [ { name: "a" data_type: TYPE_FP33 dims: [ 3 ] } ]
                """).getMessage();

        assertContains(m, "m/config.pbtxt:3:32: ", "field 'data_type'", "TYPE_FP33", "TYPE_FP32", "TYPE_BF16");
    }

    @Test
    void parse_wrongTypeOfValue_namesFieldAndValue() {
        String m = invalid("""
                name: "m"
                backend: "python"
                max_batch_size: "eight"
                """).getMessage();

        assertContains(m, "m/config.pbtxt:3:17: ", "field 'max_batch_size'", "eight");
    }

    @Test
    void parse_singularFieldTwice_rejectedLikeTriton() {
        String m = invalid("name: \"m\"\nbackend: \"python\"\nbackend: \"onnxruntime\"\n").getMessage();

        assertContains(m, "m/config.pbtxt:3:", "backend");
    }

    @Test
    void parse_nameMismatch_namesBothNamesAndLine() {
        String m = invalid("""
                backend: "python"
                name: "other"
                """).getMessage();

        assertContains(m, "m/config.pbtxt:2:1: ", "field 'name'", "'other'", "'m'");
    }

    @Test
    void parse_preferredBatchSizeAboveMax_namesFieldLine() {
        String m = invalid("""
                name: "m"
                backend: "python"
                max_batch_size: 8
                dynamic_batching {
                  preferred_batch_size: [ 4,
                    16 ]
                }
                """).getMessage();

        assertContains(m, "m/config.pbtxt:5:3: ", "field 'dynamic_batching.preferred_batch_size'", "16", "max_batch_size 8");
    }

    @Test
    void parse_dynamicBatchingWithoutBatching_rejected() {
        String m = invalid("name: \"m\"\nbackend: \"python\"\ndynamic_batching { }\n").getMessage();

        assertContains(m, "m/config.pbtxt:3:1: ", "field 'dynamic_batching'", "max_batch_size");
    }

    @Test
    void parse_inconsistentPriorityLevels_rejected() {
        assertContains(invalid("name: \"m\"\nbackend: \"python\"\nmax_batch_size: 2\ndynamic_batching { priority_levels: 2 default_priority_level: 3 }\n")
                .getMessage(), "m/config.pbtxt:4:", "default_priority_level 3");
        assertContains(invalid("name: \"m\"\nbackend: \"python\"\nmax_batch_size: 2\n"
                + "dynamic_batching { priority_queue_policy { key: 1 value { max_queue_size: 1 } } }\n").getMessage(),
                "m/config.pbtxt:4:", "priority_levels is 0");
    }

    @Test
    void parse_negativeMaxBatchSize_rejected() {
        assertContains(invalid("name: \"m\"\nbackend: \"python\"\nmax_batch_size: -1\n").getMessage(), "m/config.pbtxt:3:1: ",
                "field 'max_batch_size'", "-1");
    }

    @Test
    void parse_missingDataType_rejected() {
        assertContains(invalid("name: \"m\"\nbackend: \"python\"\ninput [ { name: \"a\" dims: [ 1 ] } ]\n").getMessage(),
                "m/config.pbtxt:3:", "field 'data_type'", "'a'");
    }

    @Test
    void parse_emptyDimsAndZeroDim_rejected() {
        assertContains(invalid("name: \"m\"\nbackend: \"python\"\ninput [ { name: \"a\" data_type: TYPE_FP32 } ]\n").getMessage(),
                "m/config.pbtxt:3:", "field 'input.dims'", "'a'");
        assertContains(invalid("name: \"m\"\nbackend: \"python\"\noutput [ { name: \"a\" data_type: TYPE_FP32 dims: [ 2, 0 ] } ]\n")
                .getMessage(), "m/config.pbtxt:3:", "field 'output.dims'", "dimension 0");
    }

    @Test
    void parse_reshapeWithOtherElementCount_rejected() {
        assertContains(invalid("name: \"m\"\nbackend: \"python\"\ninput [ { name: \"a\" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 3 ] } } ]\n")
                .getMessage(), "m/config.pbtxt:3:", "input.reshape.shape", "[3]");
    }

    @Test
    void parse_duplicateTensorName_rejected() {
        assertContains(invalid("""
                name: "m"
                backend: "python"
                input [ { name: "a" data_type: TYPE_FP32 dims: [ 1 ] },
                        { name: "a" data_type: TYPE_FP32 dims: [ 1 ] } ]
                """).getMessage(), "m/config.pbtxt:4:", "'a' is declared twice");
    }

    @Test
    void parse_rateLimiter_resourcesAndPriority_tritonExample() {
        ModelConfig c = ModelConfigParser.parse("""
                name: "m"
                backend: "python"
                instance_group [
                  {
                    count: 1
                    kind: KIND_GPU
                    gpus: [ 0, 1, 2 ]
                    rate_limiter {
                      resources [ { name: "R1" count: 4 }, { name: "R2" global: True count: 2 } ]
                      priority: 2
                    }
                  },
                  { kind: KIND_CPU }
                ]
                """, "m/config.pbtxt", "m");
        io.backplane.spi.config.RateLimiterConfig r = c.instanceGroups().get(0).rateLimiter();
        assertEquals(io.backplane.spi.config.RateLimiterConfig.of(List.of(io.backplane.spi.config.RateLimiterConfig.Resource.of("R1", false, 4),
                io.backplane.spi.config.RateLimiterConfig.Resource.of("R2", true, 2)), 2), r);
        assertNull(c.instanceGroups().get(1).rateLimiter(), "a group without rate_limiter has none");
        assertEquals(1, ModelConfigParser.parse("name: \"m\"\nbackend: \"python\"\ninstance_group [ { rate_limiter { } } ]\n", "m/config.pbtxt", "m")
                .instanceGroups().get(0).rateLimiter().effectivePriority(), "priority 0 or unset counts as 1");
    }

    @Test
    void parse_rateLimiterChecks_nameCountDuplicate() {
        assertContains(invalid("name: \"m\"\nbackend: \"python\"\ninstance_group [ { rate_limiter { resources [ { count: 1 } ] } } ]\n").getMessage(),
                "m/config.pbtxt:3:", "rate_limiter", "name '' is empty");
        assertContains(invalid("name: \"m\"\nbackend: \"python\"\ninstance_group [ { rate_limiter { resources [ { name: \"R\" count: 4294967295 } ] } } ]\n")
                .getMessage(), "m/config.pbtxt:3:", "count", "4294967295 is too large");
        assertContains(invalid("name: \"m\"\nbackend: \"python\"\ninstance_group [ { rate_limiter { resources [ { name: \"R\" count: -1 } ] } } ]\n")
                .getMessage(), "m/config.pbtxt:3:");
        assertContains(invalid("name: \"m\"\nbackend: \"python\"\ninstance_group [ { rate_limiter { resources [ { name: \"R\" count: 1 },"
                + " { name: \"R\" count: 2 } ] } } ]\n").getMessage(), "m/config.pbtxt:3:", "'R' is listed twice");
        assertContains(invalid("name: \"m\"\nbackend: \"python\"\ninstance_group [ { rate_limiter { priority: 4294967295 } } ]\n").getMessage(),
                "m/config.pbtxt:3:", "priority", "too large");
    }

    @Test
    void parse_instanceGroupChecks_countAndGpus() {
        assertContains(invalid("name: \"m\"\nbackend: \"python\"\ninstance_group [ { count: 0 } ]\n").getMessage(),
                "m/config.pbtxt:3:", "instance_group.count", "count 0");
        assertContains(invalid("name: \"m\"\nbackend: \"python\"\ninstance_group [ { kind: KIND_CPU gpus: [ 0 ] } ]\n").getMessage(),
                "m/config.pbtxt:3:", "instance_group.gpus", "KIND_GPU");
    }

    @Test
    void parse_noBackendOrUnsupportedPlatform_rejected() {
        assertContains(invalid("name: \"m\"\n").getMessage(), "m/config.pbtxt", "neither a backend nor a platform");
        BackplaneException e = assertThrows(BackplaneException.class,
                () -> ModelConfigParser.parse("name: \"m\"\nplatform: \"pytorch_libtorch\"\n", "m/config.pbtxt", "m", CATALOG));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertContains(e.getMessage(), "m/config.pbtxt:2:1: ", "field 'platform'", "pytorch_libtorch", "no installed backend serves");
        assertContains(assertThrows(BackplaneException.class, () -> ModelConfigParser.parse(
                "name: \"m\"\nplatform: \"onnxruntime_onnx\"\nbackend: \"python\"", "m/config.pbtxt", "m", CATALOG)).getMessage(),
                "m/config.pbtxt:3:", "contradicts platform 'onnxruntime_onnx'", "served by backend 'cpu'");
        assertEquals("python", ModelConfigParser.parse("name: \"m\"\nplatform: \"pytorch_libtorch\"\nbackend: \"python\"", "m/config.pbtxt", "m")
                .backend());
    }

    @Test
    void parse_duplicateParameterKey_rejected() {
        assertContains(invalid("""
                name: "m"
                backend: "python"
                parameters { key: "k" value { string_value: "1" } }
                parameters { key: "k" value { string_value: "2" } }
                """).getMessage(), "m/config.pbtxt:3:", "field 'parameters'", "[k]");
    }

    @Test
    void parse_unknownParameterValueKind_rejected() {
        assertContains(invalid("name: \"m\"\nbackend: \"python\"\nparameters { key: \"k\" value { int_value: 1 } }\n").getMessage(),
                "m/config.pbtxt:3:", "'int_value' is unknown in ModelParameter");
    }

    @Test
    void validate_afterAutoComplete_rechecksRecords() {
        ModelConfig bad = ModelConfig.builder("m").backend("python").maxBatchSize(2)
                .dynamicBatching(DynamicBatching.builder().preferredBatchSizes(List.of(4)).build()).build();

        BackplaneException e = assertThrows(BackplaneException.class, () -> ModelConfigValidator.validate(bad, "m (auto-completed)"));
        assertContains(e.getMessage(), "m (auto-completed): field 'dynamic_batching.preferred_batch_size'", "4");
    }

    @Test
    void parse_wrongBoolValue_namesField() {
        assertContains(invalid("name: \"m\"\nbackend: \"python\"\nmodel_transaction_policy { decoupled: yes }\n").getMessage(),
                "m/config.pbtxt:3:39: ", "field 'decoupled'", "yes");
    }

    @Test
    void parse_enumByUnknownNumber_rejectedNotUnrecognized() {
        assertContains(invalid("name: \"m\"\nbackend: \"python\"\ninput [ { name: \"a\" data_type: 99 dims: [ 1 ] } ]\n").getMessage(),
                "m/config.pbtxt:3:", "field 'data_type'", "99");
        assertContains(invalid("name: \"m\"\nbackend: \"python\"\ninstance_group [ { kind: 7 } ]\n").getMessage(),
                "m/config.pbtxt:3:", "instance_group.kind", "kind 7");
    }

    @Test
    void parse_twoVersionPolicyChoices_rejected() {
        assertContains(invalid("name: \"m\"\nbackend: \"python\"\nversion_policy { latest { num_versions: 1 } all { } }\n").getMessage(),
                "m/config.pbtxt:3:", "all", "latest");
    }

    @Test
    void parse_mixedListAndRepeatedSyntax_positionsFollowElements() {
        String m = invalid("""
                name: "m"
                backend: "python"
                input [ { name: "a" data_type: TYPE_FP32 dims: [ 1 ] } ]
                input { name: "b" data_type: TYPE_FP32 dims: [ 1 ] }
                input [ { name: "c" data_type: TYPE_FP32 dims: [ 1 ] }, { name: "d" data_type: TYPE_FP32 dims: [ 0 ] } ]
                """).getMessage();

        assertContains(m, "m/config.pbtxt:5:", "'d'", "dimension 0");
    }

    @Test
    void parse_hugeUnsignedValue_rejectedNotWrapped() {
        assertContains(invalid("name: \"m\"\nbackend: \"python\"\nmax_batch_size: 4\n"
                + "dynamic_batching { max_queue_delay_microseconds: 18446744073709551615 }\n").getMessage(),
                "m/config.pbtxt:4:", "max_queue_delay_microseconds", "18446744073709551615");
    }

    @Test
    void parseModelDirectory_notUtf8_invalidArgumentNamingFile(@org.junit.jupiter.api.io.TempDir Path tmp) throws java.io.IOException {
        Path dir = java.nio.file.Files.createDirectories(tmp.resolve("m"));
        java.nio.file.Files.write(dir.resolve("config.pbtxt"), new byte[] {'n', 'a', 'm', 'e', ':', ' ', '"', (byte) 0xff, '"'});

        BackplaneException e = assertThrows(BackplaneException.class, () -> ModelConfigParser.parseModelDirectory(dir));

        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertContains(e.getMessage(), dir.resolve("config.pbtxt").toString(), "UTF-8");
    }

    @Test
    void parseModelDirectory_byteOrderMarkAndCrlf_accepted(@org.junit.jupiter.api.io.TempDir Path tmp) throws java.io.IOException {
        Path dir = java.nio.file.Files.createDirectories(tmp.resolve("m"));
        java.nio.file.Files.writeString(dir.resolve("config.pbtxt"), "\uFEFFname: \"m\"\r\nbackend: \"python\"\r\n");

        assertEquals("python", ModelConfigParser.parseModelDirectory(dir).backend());
    }

    @Test
    void versionFolders_sameNumberTwice_rejected(@org.junit.jupiter.api.io.TempDir Path tmp) throws java.io.IOException {
        java.nio.file.Files.createDirectories(tmp.resolve("1"));
        java.nio.file.Files.createDirectories(tmp.resolve("01"));
        java.nio.file.Files.createDirectories(tmp.resolve("7"));
        java.nio.file.Files.createDirectories(tmp.resolve("latest"));

        BackplaneException e = assertThrows(BackplaneException.class, () -> VersionFolders.scan(tmp));
        assertContains(e.getMessage(), "'1'", "'01'", "version 1");
        java.nio.file.Files.delete(tmp.resolve("01"));
        assertEquals(new VersionFolders(List.of(1L, 7L), List.of("latest")), VersionFolders.scan(tmp));
    }

    @Test
    void parse_rawView_holdsTheWholeFile() {
        ModelConfig c = ModelConfigParser.parse("""
                name: "m"  # a comment
                backend: "python"
                max_batch_size: 4
                input [ { name: "X" data_type: TYPE_FP32 dims: [ 2, 3 ] } ]
                parameters { key: "k" value: { string_value: "a \\"quoted\\" value" } }
                """, "m/config.pbtxt", "m", CATALOG);
        ConfigNode raw = c.raw();
        assertEquals("4", raw.value("max_batch_size").orElseThrow());
        ConfigNode x = raw.sections("input").getFirst();
        assertEquals(List.of("2", "3"), x.values("dims"));
        assertEquals("TYPE_FP32", x.value("data_type").orElseThrow());
        assertEquals("a \"quoted\" value", raw.section("parameters").orElseThrow().section("value").orElseThrow().value("string_value").orElseThrow());
    }

    @Test
    void parse_sectionTheBackendDeclares_isAcceptedAndReadable_elsewhereRefused() {
        String text = """
                name: "m"
                backend: "%s"
                model_operations { op_library_filename: [ "libcustom.so" ] }
                """;
        ModelConfig c = ModelConfigParser.parse(text.formatted("tuned"), "m/config.pbtxt", "m", CATALOG);
        ConfigNode ops = c.section("model_operations").orElseThrow();
        assertEquals(List.of("libcustom.so"), ops.values("op_library_filename"));

        BackplaneException e = assertThrows(BackplaneException.class, () -> ModelConfigParser.parse(text.formatted("python"), "m/config.pbtxt", "m",
                CATALOG));
        assertContains(e.getMessage(), "m/config.pbtxt:3:", "'model_operations' is not supported by Backplane");
    }

    @Test
    void parse_declaredSection_keepsPositionsOfLaterErrors() {
        BackplaneException e = assertThrows(BackplaneException.class, () -> ModelConfigParser.parse("""
                name: "m"
                backend: "tuned"
                optimization { priority: PRIORITY_MAX }
                max_batch_size: -1
                """, "m/config.pbtxt", "m", CATALOG));
        assertContains(e.getMessage(), "m/config.pbtxt:4:", "max_batch_size");
    }
}
