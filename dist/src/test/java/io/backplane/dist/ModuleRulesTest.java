package io.backplane.dist;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.library.GeneralCodingRules;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Layering rules that span modules (DESIGN.md "Dependency direction"), checked here because the
 * distribution sees every shipped module (and the testkit, a test dependency here):
 * <ul>
 *   <li>backends and plugins (frontends, metrics) compile against the SPI and the protocol module
 *       only, never against the core, the server or a tool;</li>
 *   <li>the core exports only its public API ({@code io.backplane.core} and the
 *       {@code io.backplane.core.config} parser): nothing outside the core reaches its internals;</li>
 *   <li>no protocol type crosses the SPI, so a plugin never shares protocol classes with the host;</li>
 *   <li>like all library code, backends and plugins log through SLF4J instead of writing to the
 *       standard streams.</li>
 * </ul>
 */
class ModuleRulesTest {
    private static final String[] PLUGINS = {"io.backplane.backend..", "io.backplane.plugin.."};
    private static final String[] CORE_INTERNALS = {"io.backplane.core.internal..", "io.backplane.core.plugin..", "io.backplane.core.batch..",
            "io.backplane.core.repository.."};
    private static JavaClasses classes;

    @BeforeAll
    static void importClasses() {
        classes = new ClassFileImporter().withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS).importPackages("io.backplane");
    }

    @Test
    void backendsAndPlugins_neverDependOnCoreServerOrTools() {
        noClasses().that().resideInAnyPackage(PLUGINS).should().dependOnClassesThat()
                .resideInAnyPackage("io.backplane.core..", "io.backplane.server..", "io.backplane.bench..", "io.backplane.testkit..")
                .because("backends and plugins depend on spi and protocol only (DESIGN.md); the core may change under them")
                .allowEmptyShould(true).check(classes);
    }

    @Test
    void outsideTheCore_nothingUsesCoreInternals() {
        noClasses().that().resideOutsideOfPackage("io.backplane.core..").should().dependOnClassesThat().resideInAnyPackage(CORE_INTERNALS)
                .because("the core exports only BackplaneHost and its builder, ModelControlMode, PluginDirectory and the config.pbtxt parser")
                .check(classes);
    }

    @Test
    void spi_neverMentionsProtocolTypes() {
        noClasses().that().resideInAPackage("io.backplane.spi..").should().dependOnClassesThat().resideInAPackage("io.backplane.protocol..")
                .because("protocol classes are not shared with plugin class loaders; one in an SPI signature would break isolation")
                .check(classes);
    }

    @Test
    void coreApi_neverMentionsProtocolTypes() {
        noClasses().that().resideInAPackage("io.backplane.core").should().dependOnClassesThat().resideInAPackage("io.backplane.protocol..")
                .because("an embedding application sees SPI values, never generated messages").check(classes);
    }

    @Test
    void protocol_dependsOnTheSpiNeverOnTheCore() {
        noClasses().that().resideInAPackage("io.backplane.protocol..").should().dependOnClassesThat()
                .resideInAnyPackage("io.backplane.core..", "io.backplane.server..", "io.backplane.plugin..", "io.backplane.backend..")
                .check(classes);
    }

    @Test
    void backendsAndPlugins_neverWriteToStandardStreams() {
        noClasses().that().resideInAnyPackage(PLUGINS).should(GeneralCodingRules.ACCESS_STANDARD_STREAMS).allowEmptyShould(true).check(classes);
    }
}
