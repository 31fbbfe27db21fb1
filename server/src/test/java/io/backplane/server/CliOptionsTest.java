package io.backplane.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.ModelControlMode;
import io.backplane.server.Converters.PluginOption;
import io.backplane.spi.host.FrontendFactory;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import picocli.CommandLine;

/** Option parsing of {@code backplane} and {@code backplane serve}: bad values fail with exit code 2 and a message naming the option. */
class CliOptionsTest {
    @TempDir
    Path dir;

    private final StringWriter out = new StringWriter();
    private final StringWriter err = new StringWriter();

    private CommandLine cli(Path workingDirectory, Path home) {
        CommandLine cl = Main.commandLine(workingDirectory, home, s -> {
            throw new AssertionError("no server may start in an option test");
        });
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        return cl;
    }

    private CommandLine cli() {
        return cli(dir, null);
    }

    private ServeCommand parseServe(String... args) {
        CommandLine cl = cli();
        String[] all = new String[args.length + 1];
        all[0] = "serve";
        System.arraycopy(args, 0, all, 1, args.length);
        cl.parseArgs(all);
        return cl.getSubcommands().get("serve").getCommand();
    }

    @ParameterizedTest(name = "{0} {1}")
    @CsvSource(delimiter = '|', value = {
        "--http-port            | abc        | Invalid value for option '--http-port': 'abc' is not a port number",
        "--grpc-port            | 70000      | Invalid value for option '--grpc-port': '70000' is not a port",
        "--metrics-port         | -2         | Invalid value for option '--metrics-port': '-2' is not a port",
        "--model-control-mode   | sometimes  | Invalid value for option '--model-control-mode'",
        "--backend-config       | python     | Invalid value for option '--backend-config' (<backend>,<key>=<value>): 'python' is not <name>,<key>=<value>",
        "--backend-config       | python,=1  | Invalid value for option '--backend-config'",
        "--frontend-config      | http;port  | Invalid value for option '--frontend-config'",
        "--exit-timeout-secs    | -3         | Invalid value for option '--exit-timeout-secs': '-3' is negative",
        "--exit-timeout-secs    | soon       | Invalid value for option '--exit-timeout-secs': 'soon' is not a number of seconds",
        "--repository-poll-secs | 0          | Invalid value for option '--repository-poll-secs': '0' must be at least 1",
        "--log-verbose          | loud       | Invalid value for option '--log-verbose'",
        "--memory-budget-bytes  | 0          | Invalid value for option '--memory-budget-bytes': '0' must be at least 1 (bytes)",
        "--memory-budget-bytes  | lots       | Invalid value for option '--memory-budget-bytes': 'lots' is not a number of bytes",
        "--default-max-queue-size | -1       | Invalid value for option '--default-max-queue-size': '-1' is negative",
        "--max-instances-per-model | 0       | Invalid value for option '--max-instances-per-model': '0' must be at least 1",
        "--max-instances-per-host | many     | Invalid value for option '--max-instances-per-host': 'many' is not a whole number",
    })
    void serve_badValue_exitCode2_messageNamesOption(String option, String value, String message) {
        int code = cli().execute("serve", option, value);
        assertEquals(2, code, err.toString());
        assertTrue(err.toString().contains(message), "expected <" + message + "> in:\n" + err);
        assertTrue(err.toString().contains("Try 'backplane serve --help' for more information."), err.toString());
    }

    @Test
    void serve_unknownOption_exitCode2_namesIt() {
        assertEquals(2, cli().execute("serve", "--model-stor", "x"));
        assertTrue(err.toString().contains("Unknown options: '--model-stor'"), err.toString());
    }

    @Test
    void serve_badBoolean_exitCode2_namesOption() {
        assertEquals(2, cli().execute("serve", "--allow-grpc=maybe"));
        assertTrue(err.toString().contains("Invalid value for option '--allow-grpc'"), err.toString());
    }

    @Test
    void serve_missingRepositoryDirectory_exitCode2_namesOption() {
        assertEquals(2, cli().execute("serve", "--model-repository", "no/such/dir"));
        assertTrue(err.toString().contains("Invalid value for option '--model-repository': 'no/such/dir' is not a directory"), err.toString());
    }

    @Test
    void serve_missingBackendDirectory_exitCode2_namesOption() throws IOException {
        Files.createDirectories(dir.resolve("repo"));
        assertEquals(2, cli().execute("serve", "--model-repository", "repo", "--backend-directory", "nowhere"));
        assertTrue(err.toString().contains("Invalid value for option '--backend-directory': 'nowhere' is not a directory"), err.toString());
    }

    @Test
    void serve_noRepositoryAndNoSamples_exitCode2_saysWhatWasLookedFor() {
        assertEquals(2, cli().execute("serve"));
        assertTrue(err.toString().contains("Missing option '--model-repository'"), err.toString());
        assertTrue(err.toString().contains(ServeCommand.SAMPLES.toString()), err.toString());
    }

    @Test
    void serve_loadModelInPollMode_exitCode2_namesBothOptions() throws IOException {
        Files.createDirectories(dir.resolve("repo"));
        assertEquals(2, cli().execute("serve", "--model-repository", "repo", "--model-control-mode", "poll", "--load-model", "a"));
        assertTrue(err.toString().contains("Option '--load-model' needs '--model-control-mode explicit', not 'poll'"), err.toString());
    }

    @Test
    void serve_badCacheConfig_exitCode2_namesTheOptionAndTheSyntax() throws IOException {
        Files.createDirectories(dir.resolve("repo"));
        assertEquals(2, cli().execute("serve", "--model-repository", "repo", "--cache-config", "redis,host=cache.local"));
        assertTrue(err.toString().contains("--cache-config redis,host=cache.local: only the 'local' cache exists"), err.toString());
        assertEquals(2, cli().execute("serve", "--model-repository", "repo", "--cache-config", "local,size=big"));
        assertTrue(err.toString().contains("--cache-config local,size=big: size must be a whole number of bytes"), err.toString());
        assertEquals(2, cli().execute("serve", "--model-repository", "repo", "--cache-config", "local"));
        assertTrue(err.toString().contains("Invalid value for option '--cache-config'"), err.toString());
    }

    @ParameterizedTest(name = "{0} {1}")
    @CsvSource(delimiter = '|', value = {
        "--rate-limit           | sometimes  | --rate-limit 'sometimes': give execution_count or off (the default)",
        "--rate-limit-resource  | R1         | --rate-limit-resource 'R1': the format is <name>:<count> or <name>:<count>:<device>, e.g. R1:4 or R1:4:0",
        "--rate-limit-resource  | R1:x       | --rate-limit-resource 'R1:x': the format is <name>:<count> or <name>:<count>:<device>",
        "--rate-limit-resource  | R1:4:0:1   | --rate-limit-resource 'R1:4:0:1': the format is",
        "--rate-limit-resource  | :4         | --rate-limit-resource ':4': the format is",
        "--rate-limit-resource  | R1:-1      | --rate-limit-resource 'R1:-1': the format is <name>:<count> or <name>:<count>:<device>, e.g. R1:4 or R1:4:0; count and device are 0 or more",
        "--rate-limit-resource  | R1:4:-2    | count and device are 0 or more",
        "--rate-limit-resource  | 'R1 :4'    | --rate-limit-resource 'R1 :4': the resource name 'R1 ' has spaces around it; write it without them",
    })
    void serve_badRateLimiterFlag_exitCode2_namesTheFlagAndTheSyntax(String option, String value, String message) throws IOException {
        Files.createDirectories(dir.resolve("repo"));
        assertEquals(2, cli().execute("serve", "--model-repository", "repo", option, value), err.toString());
        assertTrue(err.toString().contains(message), "expected <" + message + "> in:\n" + err);
    }

    @Test
    void noCommand_exitCode2_saysWhatToRun() {
        assertEquals(2, cli().execute());
        assertTrue(err.toString().contains("Missing command"), err.toString());
    }

    @Test
    void help_listsCommands_andServeHelpListsEveryOption() {
        assertEquals(0, cli().execute("--help"));
        assertTrue(out.toString().contains("serve") && out.toString().contains("bench"), out.toString());
        assertEquals(0, cli().execute("serve", "--help"));
        for (String o : List.of("--model-repository", "--model-control-mode", "--load-model", "--repository-poll-secs", "--http-port", "--grpc-port",
                "--metrics-port", "--backend-directory", "--bundled-backends", "--backend-config", "--cache-config", "--exit-timeout-secs", "--log-verbose",
                "--log-level", "--memory-budget-bytes", "--default-max-queue-size", "--max-instances-per-model", "--max-instances-per-host",
                "--allow-links-outside-repository", "--rate-limit", "--rate-limit-resource")) {
            assertTrue(out.toString().contains(o), o + " missing from serve --help:\n" + out);
        }
        assertTrue(out.toString().contains("default: 8000"), out.toString());
    }

    @Test
    void version_printsBackplaneVersion() {
        assertEquals(0, cli().execute("--version"));
        assertTrue(out.toString().startsWith("backplane "), out.toString());
    }

    @Test
    void serve_defaults_areTritonLike() {
        ServeCommand s = parseServe();
        assertEquals(8000, s.httpPort);
        assertEquals(8001, s.grpcPort);
        assertEquals(8002, s.metricsPort);
        assertEquals(30, s.exitTimeoutSecs);
        assertEquals(15, s.pollSecs);
        assertEquals(0, s.logVerbose);
        assertNull(s.memoryBudgetBytes);
        assertEquals(1024, s.defaultMaxQueueSize);
        assertEquals(64, s.maxInstancesPerModel);
        assertEquals(256, s.maxInstancesPerHost);
        assertNull(s.controlMode);
        assertTrue(s.allowHttp && s.allowGrpc && s.allowMetrics);
        assertFalse(s.allowLinksOutsideRepository, "links out of the repository are refused by default");
        assertEquals("off", s.rateLimit, "Triton's default: the rate limiter is off");
        assertEquals(List.of(), s.rateLimitResource);
        assertTrue(parseServe("--allow-links-outside-repository").allowLinksOutsideRepository);
        assertFalse(parseServe("--allow-links-outside-repository=false").allowLinksOutsideRepository);
    }

    @Test
    void serve_repeatableAndCaseInsensitiveOptions_parse() {
        ServeCommand s = parseServe("--model-repository", "a", "--model-repository=b", "--model-store", "c", "--model-control-mode", "EXPLICIT", "--load-model", "m1",
                "--load-model=m2", "--backend-config=python,shm_initial_bytes=1048576", "--backend-config", "cpu,opt=a=b", "--log-verbose",
                "--http-port", "0", "--grpc-port", "-1", "--allow-metrics=false", "--exit-timeout-secs", "0");
        assertEquals(List.of(Path.of("a"), Path.of("b"), Path.of("c")), s.modelRepositories);
        assertEquals(ModelControlMode.EXPLICIT, s.controlMode);
        assertEquals(List.of("m1", "m2"), s.loadModels);
        assertEquals(List.of(new PluginOption("python", "shm_initial_bytes", "1048576"), new PluginOption("cpu", "opt", "a=b")), s.backendConfig);
        assertEquals(1, s.logVerbose);
        assertEquals(0, s.httpPort);
        assertEquals(-1, s.grpcPort);
        assertEquals(false, s.allowMetrics);
        assertEquals(0, s.exitTimeoutSecs);
    }

    @Test
    void serve_drainDelay_defaultsTo0_takesSeconds_negativeRefused() throws IOException {
        assertEquals(0, parseServe().drainDelaySecs);
        assertEquals(5, parseServe("--drain-delay-secs", "5").drainDelaySecs);
        Files.createDirectories(dir.resolve("repo"));
        assertEquals(2, cli().execute("serve", "--model-repository", "repo", "--drain-delay-secs", "-1"));
        assertTrue(err.toString().contains("'-1' is negative; give a number of seconds, 0 or more"), err.toString());
    }

    @Test
    void serve_rateLimiterFlags_tritonSyntax_parse() {
        ServeCommand s = parseServe("--rate-limit", "EXECUTION_COUNT", "--rate-limit-resource", "R1:10", "--rate-limit-resource=R2:5:0",
                "--rate-limit-resource=R2:8:1");
        assertEquals("EXECUTION_COUNT", s.rateLimit);
        assertEquals(List.of("R1:10", "R2:5:0", "R2:8:1"), s.rateLimitResource);
    }

    @Test
    void frontends_portsAddressesAndDisabling_mapToFrontendOptions() {
        ServeCommand s = parseServe("--http-port", "0", "--http-address", "127.0.0.1", "--grpc-port", "-1", "--allow-metrics=false",
                "--frontend-config", "http,threads=4", "--frontend-config", "other,port=7000", "--frontend-config", "off,port=-1");
        FrontendFactory any = new FakeFrontends.Http();
        Map<String, FrontendFactory> installed = new LinkedHashMap<>();
        for (String n : List.of("http", "grpc", "metrics", "other", "off")) {
            installed.put(n, any);
        }
        List<Server.FrontendSpec> specs = s.frontends(installed);
        assertEquals(List.of("http", "other"), specs.stream().map(Server.FrontendSpec::name).toList());
        assertEquals(Map.of("port", "0", "host", "127.0.0.1", "threads", "4", "drain_timeout_ms", "30000"), specs.get(0).options(),
                "http drains within --exit-timeout-secs");
        assertEquals(Map.of("port", "7000"), specs.get(1).options());
    }

    @Test
    void frontends_defaults_startHttpGrpcMetricsOnTritonPorts() {
        ServeCommand s = parseServe();
        FrontendFactory any = new FakeFrontends.Http();
        List<Server.FrontendSpec> specs = s.frontends(Map.of("metrics", any, "grpc", any, "http", any));
        Map<String, String> ports = new LinkedHashMap<>();
        specs.forEach(f -> ports.put(f.name(), f.options().get("port")));
        assertEquals(Map.of("http", "8000", "grpc", "8001", "metrics", "8002"), ports);
    }
}
