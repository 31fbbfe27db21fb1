package io.backplane.server;

import static java.util.Objects.requireNonNull;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Unmatched;

/**
 * {@code backplane bench ARGS...}: runs the load tool, {@code io.backplane.bench.Bench} (module
 * {@code tools/bench}), with ARGS unchanged, when it is on the class path.
 */
@Command(name = "bench", description = {"Runs the load tool (io.backplane.bench.Bench from tools/bench) with the given arguments, unchanged.",
        "'backplane bench --help' shows the tool's own options."})
final class BenchCommand implements Callable<Integer> {
    static final String BENCH_CLASS = "io.backplane.bench.Bench";

    @Spec
    private CommandSpec spec;

    @Unmatched
    List<String> args = new ArrayList<>();

    private final String benchClass;

    BenchCommand(String benchClass) {
        this.benchClass = requireNonNull(benchClass, "benchClass is null");
    }

    @Override
    public Integer call() throws Exception {
        ClassLoader loader = BenchCommand.class.getClassLoader();
        Class<?> c;
        try {
            c = Class.forName(benchClass, true, loader);
        } catch (ClassNotFoundException e) {
            spec.commandLine().getErr().println("backplane bench: the load tool (" + benchClass + ", module tools/bench) is not installed: "
                    + "it is not on the class path. Build the distribution with it (./mvnw -q -B -DskipTests package) or put its jar in lib/.");
            return 1;
        }
        Method main;
        try {
            main = c.getMethod("main", String[].class);
        } catch (NoSuchMethodException e) {
            throw new IllegalStateException(benchClass + " has no public static main(String[])", e);
        }
        if (!Modifier.isStatic(main.getModifiers())) {
            throw new IllegalStateException(benchClass + ".main(String[]) is not static");
        }
        try {
            main.invoke(null, (Object) args.toArray(String[]::new));
        } catch (InvocationTargetException e) {
            if (e.getCause() instanceof Exception ex) {
                throw ex;
            }
            if (e.getCause() instanceof Error err) {
                throw err;
            }
            throw e;
        }
        return 0;
    }
}
