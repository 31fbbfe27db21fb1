package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * The stub's Python modules are unpacked one by one from {@link PythonBackend#STUB_FILES}: a module
 * added to the resource folder but not to that list would be missing at run time, in every stub.
 */
class StubFilesTest {
    @Test
    void stubFiles_everyModuleOfTheResourceFolder_isListed() throws Exception {
        URL stub = PythonBackend.class.getResource("stub/backplane_stub.py");
        assertNotNull(stub, "the stub's resources are on the test class path");
        Set<String> modules;
        try (var files = Files.list(Path.of(stub.toURI()).getParent())) {
            modules = files.map(p -> p.getFileName().toString()).filter(n -> n.endsWith(".py"))
                    .collect(Collectors.toCollection(TreeSet::new));
        }
        assertEquals(modules, new TreeSet<>(PythonBackend.STUB_FILES),
                "PythonBackend.STUB_FILES must list every .py file of the stub's resource folder");
    }
}
