package io.backplane.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** ONNX Runtime's extracted libraries are deleted once mapped, so no process leaves 22 MB in java.io.tmpdir (issue 32). */
class OrtTest {
    @TempDir
    Path dir;

    @Test
    void removeExtractedLibraries_mappedOrtDirectory_deletedWithItsFiles_othersKept() throws Exception {
        Path ort = Files.createDirectories(dir.resolve("onnxruntime-java123"));
        Path lib = Files.writeString(ort.resolve("libonnxruntime.so"), "x");
        Files.writeString(ort.resolve("libonnxruntime4j_jni.so"), "x");
        Path other = Files.createDirectories(dir.resolve("other"));
        Path otherLib = Files.writeString(other.resolve("libonnxruntime.so"), "x");
        Path maps = Files.writeString(dir.resolve("maps"), String.join("\n",
                "7f0000000000-7f0000001000 r-xp 00000000 08:01 42                         " + lib,
                "7f0000002000-7f0000003000 r-xp 00000000 08:01 43                         " + otherLib,
                "7f0000004000-7f0000005000 rw-p 00000000 00:00 0                          [heap]",
                "7f0000006000-7f0000007000 rw-p 00000000 00:00 0 "));

        assertEquals(List.of(ort), Ort.removeExtractedLibraries(maps));
        assertFalse(Files.exists(ort));
        assertTrue(Files.exists(otherLib), "a library outside an onnxruntime-java directory is not touched");
    }

    @Test
    void removeExtractedLibraries_noMapsFile_nothing() {
        assertEquals(List.of(), Ort.removeExtractedLibraries(dir.resolve("absent")));
    }

    @Test
    void environment_onLinux_leavesNoExtractedLibraryOnDisk() throws Exception {
        Path maps = Path.of("/proc/self/maps");
        org.junit.jupiter.api.Assumptions.assumeTrue(Files.isReadable(maps), "needs /proc/self/maps");
        Ort.environment();
        List<String> onDisk = Files.readAllLines(maps).stream().filter(l -> l.contains("/onnxruntime-java")).filter(l -> !l.endsWith("(deleted)"))
                .toList();
        assertEquals(List.of(), onDisk, "ONNX Runtime's libraries still on disk");
    }
}
