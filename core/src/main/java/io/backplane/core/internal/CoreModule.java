package io.backplane.core.internal;

import static java.util.Objects.requireNonNull;

import com.google.inject.AbstractModule;
import com.google.inject.Provides;
import com.google.inject.Singleton;
import io.backplane.core.plugin.PluginManager;
import io.backplane.spi.config.ModelConfig;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.UnaryOperator;

/**
 * Wires the core. Guice stays inside {@code core}: the embedded host builds this module from
 * its options and asks the injector for a {@link HostRuntime}; nothing outside sees Guice.
 */
public final class CoreModule extends AbstractModule {
    private final HostOptions options;
    private final Path workDirectory;
    private final UnaryOperator<ModelConfig> validator;

    public CoreModule(HostOptions options, Path workDirectory, UnaryOperator<ModelConfig> validator) {
        this.options = requireNonNull(options, "options is null");
        this.workDirectory = requireNonNull(workDirectory, "workDirectory is null");
        this.validator = requireNonNull(validator, "validator is null");
    }

    @Override
    protected void configure() {
        bind(HostOptions.class).toInstance(options);
        bind(HostRuntime.class).in(Singleton.class);
    }

    @Provides
    @Singleton
    HostContext hostContext() {
        return new HostContext(options.ticker(), options.unloadTimeout(), options.restartBackoffMin(), options.restartBackoffMax(),
                options.listeners(), options.callerRuns(), options.responseCacheBytes(), options.limits(), options.builtinWarmup(),
                options.rateLimiter());
    }

    @Provides
    @Singleton
    PluginManager pluginManager() {
        List<io.backplane.spi.batch.BatcherFactory> batchers = new ArrayList<>(options.batchers());
        return new PluginManager(options.backends(), batchers, options.backendsDirectories(), options.hostClassLoader(), options.backendOptions(),
                workDirectory.resolve("backends"));
    }

    @Provides
    @Singleton
    ModelSource modelSource(PluginManager plugins) {
        ModelSource repo = options.repositories().isEmpty() ? new CodeModels.EmptySource(options.allowLinksOutsideRepository())
                : new RepositorySource(options.repositories(), plugins, options.allowLinksOutsideRepository());
        List<ModelSource.Definition> defs = new ArrayList<>();
        for (HostOptions.CodeModel m : options.codeModels()) {
            defs.add(CodeModels.inCode(m.config(), m.versions(), workDirectory.resolve("models")));
        }
        return defs.isEmpty() ? repo : new CodeModels(defs, repo);
    }

    @Provides
    @Singleton
    ModelRegistry modelRegistry(ModelSource source, PluginManager plugins, HostContext host) {
        return new ModelRegistry(source, plugins, host, validator);
    }
}
