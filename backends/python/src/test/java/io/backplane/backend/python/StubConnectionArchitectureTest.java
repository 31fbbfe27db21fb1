package io.backplane.backend.python;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.lang.ArchRule;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The pieces of the stub connection stay one-way (issue 26): the lower pieces (handshake, readiness, control
 * channel, codec, memory, credits, output, and the execution holders) depend on none of the upper
 * ones; the upper pieces (hand-off, execution table, liveness) on none of each other, and none of
 * them, nor the BLS bridge, on {@link StubConnection}; only the coordinator uses the upper pieces,
 * so it alone ties them together. Each rule fails on an empty selection too (a renamed piece).
 */
class StubConnectionArchitectureTest {
    private static final String PKG = "io.backplane.backend.python.";
    private static final List<String> LOWER = names("StubHandshake", "ControlChannel", "ExecutionCodec", "ExecutionMemory",
            "ResponseCredits", "StubOutput", "StubExecution", "StubRequest", "StubReadiness");
    private static final List<String> UPPER = names("HandOff", "ExecutionTable", "Liveness");
    private static final List<String> BLS = names("BlsBridge");
    private static final List<String> COORDINATOR = names("StubConnection");
    private static final JavaClasses MAIN = new ClassFileImporter().withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
            .importPaths(java.nio.file.Path.of("target/classes"));

    @Test
    void lowerPieces_dependOnNoUpperPieceNorTheBridgeNorTheCoordinator() {
        mustNotDependOn(LOWER, concat(concat(UPPER, BLS), concat(COORDINATOR, names("PythonInstance"))),
                "the codec, memory, credits and channel are read and tested alone").check(MAIN);
    }

    @Test
    void upperPieces_dependOnNoneOfEachOtherNorTheBridgeNorTheCoordinator() {
        for (String piece : UPPER) {
            List<String> others = new ArrayList<>(UPPER);
            others.remove(piece);
            mustNotDependOn(List.of(piece), concat(concat(others, BLS), concat(COORDINATOR, names("PythonInstance"))),
                    "each reaches the connection through the callbacks it was given").check(MAIN);
        }
    }

    @Test
    void blsBridge_dependsOnNoPieceAboveTheLowerOnes() {
        mustNotDependOn(BLS, concat(UPPER, concat(COORDINATOR, names("PythonInstance"))), "the bridge sees its connection through BlsBridge.Link")
                .check(MAIN);
    }

    @Test
    void upperPieces_areUsedByTheCoordinatorOnly() {
        onlyUsedBy(UPPER, concat(UPPER, COORDINATOR), "only the coordinator ties the pieces together").check(MAIN);
    }

    /** The rules are real: a back-edge among classes made for the purpose breaks each kind of rule. */
    @Test
    void rules_failOnABackEdge() {
        JavaClasses fixture = new ClassFileImporter().importClasses(Lower.class, Upper.class, Other.class);
        List<String> lower = List.of(Lower.class.getName());
        List<String> upper = List.of(Upper.class.getName());
        assertThrows(AssertionError.class, () -> mustNotDependOn(lower, upper, "fixture").check(fixture));
        assertThrows(AssertionError.class, () -> onlyUsedBy(upper, List.of(Other.class.getName()), "fixture").check(fixture));
        mustNotDependOn(upper, lower, "fixture").check(fixture); // the forward edge is allowed
    }

    private static ArchRule mustNotDependOn(List<String> from, List<String> on, String because) {
        return noClasses().that(named(from)).should().dependOnClassesThat(named(on)).because(because);
    }

    private static ArchRule onlyUsedBy(List<String> used, List<String> users, String because) {
        return classes().that(named(used)).should().onlyHaveDependentClassesThat(named(users)).because(because);
    }

    /** The named classes and their nested classes (a lambda or an adapter inside a piece is that piece). */
    private static DescribedPredicate<JavaClass> named(List<String> fullNames) {
        return DescribedPredicate.describe("named " + fullNames,
                c -> fullNames.stream().anyMatch(n -> c.getName().equals(n) || c.getName().startsWith(n + "$")));
    }

    private static List<String> names(String... simple) {
        return Stream.of(simple).map(s -> PKG + s).toList();
    }

    private static List<String> concat(List<String> a, List<String> b) {
        return Stream.concat(a.stream(), b.stream()).toList();
    }

    /** Fixture: a lower piece with a back-edge to an upper one. */
    static final class Lower {
        Upper up = new Upper();
    }

    /** Fixture: an upper piece. */
    static final class Upper {
    }

    /** Fixture: the only class allowed to use {@link Upper}. */
    static final class Other {
    }
}
