package io.backplane.samples.embedded;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

/** The sample application loads, infers, streams and unloads, with and without the plugin directory. */
class EmbeddedHostAppTest {
    @Test
    void run_withModelsInCode_infersStreamsAndUnloads() throws Exception {
        List<String> out = new CopyOnWriteArrayList<>();
        EmbeddedHostApp.run(EmbeddedHostApp.Options.parse(), out::add);
        assertTrue(out.contains("add_sub OUTPUT0 = [11.0, 22.0, 33.0, 44.0]"), out.toString());
        assertTrue(out.contains("add_sub OUTPUT1 = [-9.0, -18.0, -27.0, -36.0]"), out.toString());
        assertTrue(out.contains("countdown streamed [3, 2, 1]"), out.toString());
        assertTrue(out.contains("add_sub ready after unload: false"), out.toString());
        assertEquals("host closed", out.getLast());
    }

    @Test
    void run_withThePluginDirectory_alsoServesTheTextopsModel() throws Exception {
        List<String> out = new CopyOnWriteArrayList<>();
        EmbeddedHostApp.run(EmbeddedHostApp.Options.parse("--plugins", PluginDirectoryTest.plugins().toString()), out::add);
        assertTrue(out.contains("shout RESULT = [HELLO PLUGIN] (the plugin sees Guava 31.1-jre)"), out.toString());
        assertTrue(out.stream().anyMatch(l -> l.startsWith("backends: ") && l.contains("textops") && l.contains("calc")), out.toString());
    }

    @Test
    void options_rejectUnknownArguments() {
        IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> EmbeddedHostApp.Options.parse("--model-repo", Path.of("x").toString()));
        assertTrue(e.getMessage().contains("unknown argument '--model-repo'"), e.getMessage());
    }
}
