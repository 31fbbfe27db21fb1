package io.backplane.core.internal;

import io.backplane.core.repository.FileRoot;
import io.backplane.spi.BackplaneException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Files a config names inside a model directory (labels, warm-up data): named inside it, and really
 * (links followed) under the model's root unless the host allows links out ({@link FileRoot}), the
 * rule every file of the model follows.
 */
final class ModelFiles {
    private ModelFiles() {
    }

    /**
     * {@code dir/name} after checking that {@code name} is a relative path that stays inside
     * {@code dir}, names a regular file, and passes {@code files}' check (its real path, links
     * followed, is under the repository root; a link to elsewhere in the repository is fine).
     *
     * @param what the config field, for the error ("model 'm' output 'prob' label_filename")
     * @throws BackplaneException INVALID_ARGUMENT naming the field and the file
     */
    static Path inside(Path dir, String name, String what, FileRoot files) {
        Path rel = name.isEmpty() || name.contains("\0") ? Path.of("..") : Path.of(name).normalize();
        if (rel.isAbsolute() || rel.startsWith("..")) {
            throw BackplaneException.invalid(what + " '" + name + "' must be a file name inside " + dir + " (no absolute path, no '..')");
        }
        Path file = dir.resolve(rel);
        if (!Files.isRegularFile(file)) {
            throw BackplaneException.invalid(what + " '" + name + "': " + file + " does not exist or is not a regular file; put it in " + dir);
        }
        return files.checkFile(file, what + " '" + name + "':");
    }
}
