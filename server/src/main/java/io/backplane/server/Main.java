package io.backplane.server;

import io.backplane.core.BackplaneHost;
import java.nio.file.Path;
import java.util.function.Consumer;
import java.util.function.UnaryOperator;
import org.jspecify.annotations.Nullable;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * {@code backplane}: the server's entry point. The launcher ({@code bin/backplane}) runs it with
 * {@code -Dbackplane.home=<distribution>}, from which {@code serve} takes its default backends
 * directory ({@code <home>/backends}) and, when there is no {@code samples/models} in the current
 * directory, its default model repository ({@code <home>/samples/models}).
 */
@Command(name = "backplane", mixinStandardHelpOptions = true, versionProvider = Main.Version.class,
        description = "Backplane: a plugin-based model server for the JVM (Open Inference Protocol over REST and gRPC).",
        synopsisSubcommandLabel = "COMMAND", commandListHeading = "%nCommands:%n")
public final class Main implements Runnable {
    /** System property naming the distribution folder (set by {@code bin/backplane}). */
    public static final String HOME_PROPERTY = "backplane.home";

    @CommandLine.Spec
    private CommandLine.Model.CommandSpec spec;

    /** Runs the command line and exits with its code (0 ok, 1 failure, 2 usage error). */
    public static void main(String[] args) {
        JvmTemporaryFolder.claim(); // before any plugin loads: native libraries unpack into java.io.tmpdir
        int code;
        try {
            code = commandLine(Path.of("").toAbsolutePath(), home(), server -> {
            }).execute(args);
        } finally {
            JvmTemporaryFolder.removeClaimed();
        }
        System.exit(code);
    }

    private static @Nullable Path home() {
        String h = System.getProperty(HOME_PROPERTY);
        return h == null || h.isBlank() ? null : Path.of(h).toAbsolutePath().normalize();
    }

    /**
     * The command line, for {@link #main} and tests.
     *
     * @param workingDirectory where relative defaults ({@code samples/models}) are looked up
     * @param home the distribution folder, or null when not run from one
     * @param onStarted called with the running server once every frontend serves (tests use it to stop it)
     */
    public static CommandLine commandLine(Path workingDirectory, @Nullable Path home, Consumer<? super Server> onStarted) {
        return commandLine(workingDirectory, home, UnaryOperator.identity(), onStarted);
    }

    /**
     * The command line of a server embedded in an application, which may register backends,
     * batchers or listeners in code.
     *
     * @param customize applied to the host builder after the options (e.g. {@code b -> b.backend(myFactory)})
     */
    public static CommandLine commandLine(Path workingDirectory, @Nullable Path home, UnaryOperator<BackplaneHost.Builder> customize,
            Consumer<? super Server> onStarted) {
        CommandLine cl = new CommandLine(new Main());
        cl.addSubcommand("serve", new ServeCommand(workingDirectory, home, customize, onStarted));
        cl.addSubcommand("bench", new BenchCommand(BenchCommand.BENCH_CLASS));
        cl.addSubcommand("aot-train", new AotTrainCommand(workingDirectory, home, customize));
        cl.setCaseInsensitiveEnumValuesAllowed(true);
        cl.setExecutionExceptionHandler(new Failures());
        cl.setParameterExceptionHandler(Main::badOptions);
        return cl;
    }

    @Override
    public void run() {
        throw new CommandLine.ParameterException(spec.commandLine(), "Missing command: use 'backplane serve', or 'backplane --help' for more");
    }

    /** Bad options: the message, suggestions for a misspelt option, where to get help; exit code 2 (not the whole usage). */
    private static int badOptions(CommandLine.ParameterException e, String[] args) {
        CommandLine cl = e.getCommandLine();
        var err = cl.getErr();
        err.println(e.getMessage());
        CommandLine.UnmatchedArgumentException.printSuggestions(e, err);
        err.println("Try '" + cl.getCommandSpec().qualifiedName() + " --help' for more information.");
        err.flush();
        return cl.getCommandSpec().exitCodeOnInvalidInput();
    }

    /** {@code --version}. */
    static final class Version implements CommandLine.IVersionProvider {
        @Override
        public String[] getVersion() {
            return new String[] {"backplane " + BackplaneHost.VERSION, "Java " + Runtime.version() + " (" + System.getProperty("java.vendor") + ")"};
        }
    }

    /** Errors while running: one clear line (the stack trace only for unexpected ones), exit code 1. */
    static final class Failures implements CommandLine.IExecutionExceptionHandler {
        @Override
        public int handleExecutionException(Exception e, CommandLine cl, CommandLine.ParseResult parseResult) {
            var err = cl.getErr();
            err.println("backplane " + cl.getCommandName() + ": " + describe(e));
            if (!(e instanceof io.backplane.spi.BackplaneException) && !(e instanceof IllegalArgumentException)) {
                e.printStackTrace(err);
            }
            err.flush();
            return 1;
        }

        /** The message, followed by the messages of its causes that add something. */
        static String describe(Throwable e) {
            StringBuilder sb = new StringBuilder(e.getMessage() == null ? e.getClass().getName() : e.getMessage());
            Throwable c = e.getCause();
            for (int depth = 0; c != null && depth < 8; depth++, c = c.getCause()) {
                if (c.getMessage() != null && !sb.toString().contains(c.getMessage())) {
                    sb.append(": ").append(c.getMessage());
                }
            }
            return sb.toString();
        }
    }
}
