package io.backplane.plugin.metrics;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import org.junit.jupiter.api.Test;

/** Plugins depend on the SPI only: never on the core (tests may), never on System.out/err or java.util.logging. */
class MetricsArchitectureTest {
    private static final JavaClasses MAIN = new ClassFileImporter().withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
            .importPackages("io.backplane.plugin.metrics");

    @Test
    void mainClasses_neverDependOnCore() {
        noClasses().should().dependOnClassesThat().resideInAPackage("io.backplane.core..").check(MAIN);
    }

    @Test
    void mainClasses_logThroughSlf4jOnly() {
        noClasses().should().accessField(System.class, "out").orShould().accessField(System.class, "err")
                .orShould().dependOnClassesThat().resideInAPackage("java.util.logging..").check(MAIN);
    }
}
