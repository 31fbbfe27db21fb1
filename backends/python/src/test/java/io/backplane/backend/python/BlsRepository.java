package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/**
 * A Triton-layout repository of this module's BLS and custom-metrics test models (plus
 * {@code onnx_add_sub} from the sample repository), and the hygiene checks after each test.
 */
final class BlsRepository {
    static final Path MODELS = Path.of("src/test/resources/models");
    static final Path ONNX_SAMPLE = Path.of("../../samples/models/onnx_add_sub");

    private static final String FAST = """
            parameters { key: "heartbeat_interval_ms" value: { string_value: "100" } }
            parameters { key: "heartbeat_timeout_ms" value: { string_value: "5000" } }
            """;

    static final String ADD_SUB = """
            name: "add_sub"
            backend: "python"
            input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ -1 ] } ]
            output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ -1 ] } ]
            instance_group [ { count: 2 kind: KIND_CPU } ]
            """ + FAST;

    static final String CALLER = """
            name: "%s"
            backend: "python"
            input [
              { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] },
              { name: "INPUT1" data_type: TYPE_FP32 dims: [ -1 ] },
              { name: "MODEL_NAME" data_type: TYPE_STRING dims: [ 1 ] optional: true }
            ]
            output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ -1 ] } ]
            instance_group [ { count: 1 kind: KIND_CPU } ]
            """ + FAST;

    static final String SQUARE = """
            name: "square"
            backend: "python"
            model_transaction_policy { decoupled: true }
            input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
            output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
            instance_group [ { kind: KIND_CPU } ]
            """ + FAST;

    static final String STREAM_CALLER = """
            name: "bls_stream_caller"
            backend: "python"
            input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
            output [ { name: "OUT" data_type: TYPE_INT32 dims: [ -1 ] } ]
            instance_group [ { kind: KIND_CPU } ]
            """ + FAST;

    static final String WAITER = """
            name: "bls_waiter"
            backend: "python"
            input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] }, { name: "TARGET" data_type: TYPE_STRING dims: [ 1 ] } ]
            output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
            instance_group [ { count: %d kind: KIND_CPU } ]
            """ + FAST;

    /** Decoupled, async execute, batching: {@code async_sleeper} and the BLS caller {@code async_bls_fanout} (one stub each). */
    static final String ASYNC_DECOUPLED = """
            name: "%s"
            backend: "python"
            max_batch_size: 8
            dynamic_batching { max_queue_delay_microseconds: 2000 }
            model_transaction_policy { decoupled: true }
            input [ %s ]
            output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
            instance_group [ { count: 1 kind: KIND_CPU } ]
            """ + FAST;

    static final String SLOW_ECHO = """
            name: "slow_echo"
            backend: "python"
            input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
            output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
            instance_group [ { count: 2 kind: KIND_CPU } ]
            """ + FAST;

    static final String METRICS_USER = """
            name: "metrics_user"
            backend: "python"
            input [ { name: "X" data_type: TYPE_INT32 dims: [ -1 ] } ]
            output [ { name: "Y" data_type: TYPE_STRING dims: [ -1 ] } ]
            instance_group [ { kind: KIND_CPU } ]
            """ + FAST;

    static final String PARAMS = """
            name: "%s"
            backend: "python"
            input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
            output [ { name: "P" data_type: TYPE_STRING dims: [ 1 ] } ]
            instance_group [ { kind: KIND_CPU } ]
            """ + FAST;

    static final String IN_INIT = """
            name: "bls_in_init"
            backend: "python"
            input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
            output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
            """;

    /** bls_modes and bls_modes_async, plain or decoupled. */
    static final String MODES = """
            name: "%s"
            backend: "python"
            %s
            input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "TARGET" data_type: TYPE_STRING dims: [ 1 ] } ]
            output [ { name: "REPORT" data_type: TYPE_STRING dims: [ 1 ] } ]
            instance_group [ { kind: KIND_CPU } ]
            """ + FAST;

    private BlsRepository() {
    }

    static void requirePython() throws Exception {
        boolean ok;
        try {
            Process p = new ProcessBuilder("python3", "-c", "import numpy").redirectErrorStream(true).start();
            ok = p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0;
        } catch (IOException e) {
            ok = false;
        }
        Assumptions.assumeTrue(ok, "python3 with numpy is not installed");
    }

    /** Writes the repository; {@code waiterInstances} sets bls_waiter's instance count. */
    static Path write(Path root, int waiterInstances) throws IOException {
        Path repo = Files.createDirectories(root.resolve("repo"));
        model(repo, "add_sub", ADD_SUB);
        model(repo, "bls_caller", CALLER.formatted("bls_caller"));
        model(repo, "bls_async_caller", CALLER.formatted("bls_async_caller"));
        model(repo, "square", SQUARE);
        model(repo, "bls_stream_caller", STREAM_CALLER);
        model(repo, "bls_waiter", WAITER.formatted(waiterInstances));
        model(repo, "slow_echo", SLOW_ECHO);
        model(repo, "async_sleeper", ASYNC_DECOUPLED.formatted("async_sleeper", """
                { name: "ID" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "DELAY_MS" data_type: TYPE_INT32 dims: [ 1 ] },
                { name: "MODE" data_type: TYPE_INT32 dims: [ 1 ] }"""));
        model(repo, "async_bls_fanout", ASYNC_DECOUPLED.formatted("async_bls_fanout", """
                { name: "ID" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "FANOUT" data_type: TYPE_INT32 dims: [ 1 ] }"""));
        model(repo, "metrics_user", METRICS_USER);
        model(repo, "bls_params_caller", PARAMS.formatted("bls_params_caller"));
        model(repo, "params_echo", PARAMS.formatted("params_echo"));
        model(repo, "bls_in_init", IN_INIT);
        for (String source : List.of("bls_modes", "bls_modes_async")) {
            model(repo, source, source, MODES.formatted(source, ""));
            model(repo, source + "_decoupled", source, MODES.formatted(source + "_decoupled", "model_transaction_policy { decoupled: true }"));
        }
        Path onnx = Files.createDirectories(repo.resolve("onnx_add_sub/1"));
        Files.copy(ONNX_SAMPLE.resolve("config.pbtxt"), repo.resolve("onnx_add_sub/config.pbtxt"));
        Files.copy(ONNX_SAMPLE.resolve("1/model.onnx"), onnx.resolve("model.onnx"));
        return repo;
    }

    private static void model(Path repo, String name, String config) throws IOException {
        model(repo, name, name, config);
    }

    private static void model(Path repo, String name, String source, String config) throws IOException {
        Path dir = Files.createDirectories(repo.resolve(name).resolve("1"));
        Files.copy(MODELS.resolve(source).resolve("1/model.py"), dir.resolve("model.py"));
        Files.writeString(repo.resolve(name).resolve("config.pbtxt"), config);
    }

    /** Nothing of this JVM is left: no child process, no shared-memory file. */
    static void assertClean() throws IOException {
        List<String> left = new ArrayList<>();
        ProcessHandle.current().children().filter(ProcessHandle::isAlive).forEach(p -> left.add("process " + p.pid() + " " + p.info().command().orElse("")));
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(SharedRegion.SHM_DIR, SharedRegion.FILE_PREFIX + ProcessHandle.current().pid() + "-*")) {
            for (Path p : ds) {
                left.add(p.toString());
            }
        }
        assertEquals(List.of(), left, "left behind");
    }
}
