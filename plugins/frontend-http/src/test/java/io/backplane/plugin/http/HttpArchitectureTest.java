package io.backplane.plugin.http;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.Dependency;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.domain.JavaModifier;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.lang.ArchCondition;
import com.tngtech.archunit.lang.ArchRule;
import com.tngtech.archunit.lang.ConditionEvents;
import com.tngtech.archunit.lang.SimpleConditionEvent;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** Plugins depend on the SPI only: never on the core (tests may), never on System.out/err or java.util.logging. */
class HttpArchitectureTest {
    private static final JavaClasses MAIN = new ClassFileImporter().withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
            .importPackages("io.backplane.plugin.http");

    @Test
    void mainClasses_neverDependOnCore() {
        noClasses().should().dependOnClassesThat().resideInAPackage("io.backplane.core..").check(MAIN);
    }

    @Test
    void mainClasses_logThroughSlf4jOnly() {
        noClasses().should().accessField(System.class, "out").orShould().accessField(System.class, "err")
                .orShould().dependOnClassesThat().resideInAPackage("java.util.logging..").check(MAIN);
    }

    // The REST request path is one-way: RestRouter -> handlers (RestRoute implementations) -> helpers.

    /** The handler a class belongs to: itself or the nearest enclosing class that implements {@link RestRoute}. */
    private static Optional<JavaClass> handlerOf(JavaClass c) {
        for (Optional<JavaClass> k = Optional.of(c); k.isPresent(); k = k.get().getEnclosingClass()) {
            JavaClass x = k.get();
            if (!x.isInterface() && !x.getModifiers().contains(JavaModifier.ABSTRACT) && x.isAssignableTo(RestRoute.class)) {
                return k;
            }
        }
        return Optional.empty();
    }

    private static JavaClass outermost(JavaClass c) {
        JavaClass x = c;
        while (x.getEnclosingClass().isPresent()) {
            x = x.getEnclosingClass().get();
        }
        return x;
    }

    private static final DescribedPredicate<JavaClass> HANDLER = DescribedPredicate.describe("a REST handler (a RestRoute or nested in one)",
            c -> handlerOf(c).isPresent());
    private static final DescribedPredicate<JavaClass> ROUTER = DescribedPredicate.describe("the RestRouter",
            c -> outermost(c).isEquivalentTo(RestRouter.class));

    /** A handler never depends on the router, nor on another handler. */
    static final ArchRule HANDLERS_ARE_LEAVES = classes().that(HANDLER).should(new ArchCondition<JavaClass>("depend on neither the router nor another handler") {
        @Override
        public void check(JavaClass origin, ConditionEvents events) {
            JavaClass own = handlerOf(origin).orElseThrow();
            for (Dependency d : origin.getDirectDependenciesFromSelf()) {
                JavaClass target = d.getTargetClass();
                Optional<JavaClass> other = handlerOf(target);
                if (ROUTER.test(target)) {
                    events.add(SimpleConditionEvent.violated(d, "back-edge to the router: " + d.getDescription()));
                } else if (other.isPresent() && !other.get().equals(own)) {
                    events.add(SimpleConditionEvent.violated(d, "handler " + own.getSimpleName() + " depends on handler "
                            + other.get().getSimpleName() + ": " + d.getDescription()));
                }
            }
        }
    });

    @Test
    void restHandlers_dependOnNeitherTheRouterNorEachOther() {
        HANDLERS_ARE_LEAVES.check(MAIN);
    }

    @Test
    void restHandlers_areKnownOnlyToTheRouter() {
        noClasses().that(DescribedPredicate.not(HANDLER)).and(DescribedPredicate.not(ROUTER)).should().dependOnClassesThat(HANDLER).check(MAIN);
    }

    @Test
    void restRouter_isUsedOnlyByTheFrontend() {
        DescribedPredicate<JavaClass> frontend = DescribedPredicate.describe("the HttpFrontend", c -> outermost(c).isEquivalentTo(HttpFrontend.class));
        noClasses().that(DescribedPredicate.not(ROUTER)).and(DescribedPredicate.not(frontend)).should().dependOnClassesThat(ROUTER).check(MAIN);
    }

    /** The rule bites: handlers in the test sources that reach back into the router, or into a sibling, are reported. */
    @Test
    void restHandlersRule_failsOnABackEdge() {
        JavaClasses withFixtures = new ClassFileImporter().importPackages("io.backplane.plugin.http");
        AssertionError e = assertThrows(AssertionError.class, () -> HANDLERS_ARE_LEAVES.check(withFixtures));
        String report = e.getMessage();
        assertTrue(report.contains("back-edge to the router") && report.contains(BackEdgeFixtures.RouterCallingHandler.class.getSimpleName()), report);
        assertTrue(report.contains("handler SiblingCallingHandler depends on handler StatisticsHandler"), report);
        assertTrue(!report.contains("GenerateHandler") && !report.contains("InferenceHandler"), report);
    }
}
