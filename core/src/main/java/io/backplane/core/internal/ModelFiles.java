package io.backplane.core.internal;

import io.backplane.spi.BackplaneException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** Files a config names inside a model directory (labels, warm-up data): never outside it. */
final class ModelFiles {
    private ModelFiles() {
    }

    /**
     * {@code dir/name} after checking that {@code name} is a relative path that stays inside
     * {@code dir}, also after following links, and names a regular file.
     *
     * @param what the config field, for the error ("output 'prob' label_filename")
     * @throws BackplaneException INVALID_ARGUMENT naming the field and the file
     */
    static Path inside(Path dir, String name, String what) {
        Path rel = name.isEmpty() || name.contains("\0") ? Path.of("..") : Path.of(name).normalize();
        if (rel.isAbsolute() || rel.startsWith("..")) {
            throw BackplaneException.invalid(what + " '" + name + "' must be a file name inside " + dir + " (no absolute path, no '..')");
        }
        Path file = dir.resolve(rel);
        if (!Files.isRegularFile(file)) {
            throw BackplaneException.invalid(what + " '" + name + "': " + file + " does not exist or is not a regular file; put it in " + dir);
        }
        try {
            if (!file.toRealPath().startsWith(dir.toRealPath())) {
                throw BackplaneException.invalid(what + " '" + name + "': " + file + " links outside " + dir + "; copy the file into the model directory");
            }
        } catch (IOException e) {
            throw BackplaneException.invalid(what + " '" + name + "': cannot resolve " + file + ": " + e);
        }
        return file;
    }
}
