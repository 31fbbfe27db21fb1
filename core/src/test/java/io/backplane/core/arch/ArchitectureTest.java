package io.backplane.core.arch;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noMethods;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.library.GeneralCodingRules;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Layering rules of DESIGN.md and STYLE.md for the SPI and the core. (Rules that span every
 * module, e.g. "backends never depend on core", run in the dist module, which sees them all.)
 */
class ArchitectureTest {
    private static JavaClasses classes;

    @BeforeAll
    static void importClasses() {
        // The compiled classes of this module and of the SPI (surefire runs in the module folder).
        classes = new ClassFileImporter().withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
                .importPaths(java.nio.file.Path.of("target/classes"), java.nio.file.Path.of("../spi/target/classes"));
    }

    @Test
    void spi_dependsOnTheJdkAndAnnotationsOnly() {
        classes().that().resideInAPackage("io.backplane.spi..").should().onlyDependOnClassesThat()
                .resideInAnyPackage("io.backplane.spi..", "java..", "org.jspecify.annotations..")
                .because("the SPI should have only minimal dependencies (STYLE 1)").check(classes);
    }

    @Test
    void spi_neverDependsOnCore() {
        noClasses().that().resideInAPackage("io.backplane.spi..").should().dependOnClassesThat().resideInAPackage("io.backplane.core..")
                .check(classes);
    }

    @Test
    void guice_staysInsideTheCoreInternals() {
        noClasses().that().resideInAnyPackage("io.backplane.spi..", "io.backplane.core.plugin..", "io.backplane.core.batch..")
                .should().dependOnClassesThat().resideInAPackage("com.google.inject..").because("Guice stays inside core wiring (STYLE 10)")
                .check(classes);
    }

    @Test
    void protocolMessages_stayInsideTheConfigParser() {
        noClasses().that().resideInAPackage("io.backplane.core..").and().resideOutsideOfPackage("io.backplane.core.config..")
                .should().dependOnClassesThat().resideInAPackage("io.backplane.protocol..")
                .because("the generated Triton messages are the parser's input format, not a type the host passes around").check(classes);
    }

    @Test
    void publicCoreMethods_neverTakeOrReturnProtocolTypes() {
        DescribedPredicate<JavaClass> protocol = JavaClass.Predicates.resideInAPackage("io.backplane.protocol..");
        noMethods().that().arePublic().and().areDeclaredInClassesThat().resideInAPackage("io.backplane.core..")
                .should().haveRawReturnType(protocol).orShould().haveRawParameterTypes(DescribedPredicate.anyElementThat(protocol))
                .because("an embedding application and the testkit see SPI values, never generated messages").check(classes);
    }

    @Test
    void corePackages_haveNoCycles() {
        slices().matching("io.backplane.core.(*)..").should().beFreeOfCycles().check(classes);
    }

    @Test
    void libraryCode_neverWritesToStandardStreams() {
        GeneralCodingRules.NO_CLASSES_SHOULD_ACCESS_STANDARD_STREAMS.check(classes);
    }

    @Test
    void libraryCode_neverUsesJavaUtilLogging() {
        GeneralCodingRules.NO_CLASSES_SHOULD_USE_JAVA_UTIL_LOGGING.check(classes);
    }

    // ---- the core's internals read one way (docs/architecture.md) ----

    private static final String INTERNAL = "io\\.backplane\\.core\\.internal\\.";

    private static String internal(String... simpleNames) {
        return INTERNAL + "(" + String.join("|", simpleNames) + ")(\\$.*)?";
    }

    @Test
    void instanceSlot_reachesItsVersionOnlyThroughItsBatchSource() {
        noClasses().that().haveNameMatching(internal("InstanceSlot")).should().dependOnClassesThat()
                .haveNameMatching(internal("ModelVersion", "Admission", "BatchGuard", "ModelRegistry"))
                .because("an instance worker pulls dispatched batches from InstanceSlot.BatchSource and nothing else of its version").check(classes);
    }

    @Test
    void requestState_releasesThroughItsHoldOnly() {
        noClasses().that().haveNameMatching(internal("RequestState")).should().dependOnClassesThat()
                .haveNameMatching(internal("ModelVersion", "Admission", "BatchGuard", "InstanceSlot", "ModelRegistry"))
                .because("a request gives back its hold through RequestState.Hold, exactly once").check(classes);
    }

    @Test
    void responseOrder_ownsItsStateAndCallsNothingBack() {
        classes().that().haveNameMatching(internal("ResponseOrder")).should().onlyDependOnClassesThat()
                .resideInAnyPackage("java..", "org.jspecify.annotations..").orShould().haveNameMatching(internal("ResponseOrder"))
                .check(classes);
    }

    @Test
    void objectsHandedToPlugins_cannotBeCastToCoreTypes() {
        for (Class<?> spi : List.of(io.backplane.spi.ModelContext.class, io.backplane.spi.InstanceContext.class, io.backplane.spi.batch.BatcherContext.class,
                io.backplane.spi.ScheduledRequest.class, io.backplane.spi.ResponseSender.class)) {
            classes().that().resideInAPackage("io.backplane.core..").and().implement(spi).should().notBePublic()
                    .because("a backend or batcher given a " + spi.getSimpleName() + " must not reach the core behind it").check(classes);
        }
    }
}
