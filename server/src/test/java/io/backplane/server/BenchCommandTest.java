package io.backplane.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

class BenchCommandTest {
    private final StringWriter err = new StringWriter();

    private CommandLine cli(String benchClass) {
        CommandLine cl = new CommandLine(new BenchCommand(benchClass));
        cl.setExecutionExceptionHandler(new Main.Failures());
        cl.setErr(new PrintWriter(err, true));
        return cl;
    }

    @Test
    void bench_toolPresent_getsArgumentsUnchanged() {
        assertEquals(0, cli(FakeBench.class.getName()).execute("--model", "add_sub", "-c", "4", "--help", "positional"));
        assertEquals(List.of("--model", "add_sub", "-c", "4", "--help", "positional"), FakeBench.lastArgs);
    }

    @Test
    void bench_toolThrows_exitCode1_withItsMessage() {
        assertEquals(1, cli(FakeBench.class.getName()).execute("--explode"));
        assertTrue(err.toString().contains("bench: unknown option --explode"), err.toString());
    }

    @Test
    void bench_toolMissing_exitCode1_clearError() {
        assertEquals(1, cli("io.backplane.bench.NoSuchBench").execute("--duration", "5"));
        assertTrue(err.toString().contains("the load tool (io.backplane.bench.NoSuchBench, module tools/bench) is not installed"), err.toString());
    }

    @Test
    void bench_viaMain_isASubcommand() {
        CommandLine cl = Main.commandLine(java.nio.file.Path.of("."), null, s -> {
        });
        assertTrue(cl.getSubcommands().containsKey("bench"));
    }
}
