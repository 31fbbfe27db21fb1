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
 * distribution sees every shipped module: backends and plugins (frontends, metrics) compile
 * against the SPI only, never against the core, and, like all library code, log through SLF4J
 * instead of writing to the standard streams.
 */
class ModuleRulesTest {
    private static final String[] PLUGINS = {"io.backplane.backend..", "io.backplane.plugin.."};
    private static JavaClasses classes;

    @BeforeAll
    static void importClasses() {
        classes = new ClassFileImporter().withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS).importPackages("io.backplane");
    }

    @Test
    void backendsAndPlugins_neverDependOnCore() {
        noClasses().that().resideInAnyPackage(PLUGINS).should().dependOnClassesThat().resideInAPackage("io.backplane.core..")
                .because("backends and plugins depend on spi only (DESIGN.md); the core may change under them").allowEmptyShould(true).check(classes);
    }

    @Test
    void backendsAndPlugins_neverWriteToStandardStreams() {
        noClasses().that().resideInAnyPackage(PLUGINS).should(GeneralCodingRules.ACCESS_STANDARD_STREAMS).allowEmptyShould(true).check(classes);
    }
}
