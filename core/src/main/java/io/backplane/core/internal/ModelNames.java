package io.backplane.core.internal;

import io.backplane.spi.BackplaneException;

/**
 * Which model names a load accepts: Triton's rule (its repository manager refuses an empty name,
 * one of whitespace only, and one with {@code ..} or {@code /}, with the sentences its clients
 * match on), plus what a folder name cannot hold on the file system Backplane runs on (a NUL, more
 * than 255 characters, and a backslash where it separates folders, as on Windows) and {@code .},
 * which names the folder it is in. Every other character is accepted, as in Triton; a backend may
 * refuse more (Triton's python backend refuses shell characters in a stub's name).
 */
public final class ModelNames {
    private ModelNames() {
    }

    /** The longest name a folder can have. */
    static final int MAX_LENGTH = 255;

    /** Whether a backslash separates folders here (Windows), so that no folder name can hold one. */
    private static final boolean BACKSLASH_SEPARATES = java.io.File.separatorChar == '\\';

    /**
     * @throws BackplaneException INVALID_ARGUMENT with Triton's sentence first, then what to do
     */
    public static void check(String name) {
        if (name.isEmpty()) {
            throw BackplaneException.invalid("model name must not be empty; name the model's folder in the repository");
        }
        if (name.isBlank()) {
            throw BackplaneException.invalid("model name must not contain only whitespace characters; name the model's folder in the repository");
        }
        if (name.contains("..") || name.indexOf('/') >= 0) {
            throw BackplaneException.invalid("invalid model name '" + name + "', model name must not contain path traversal characters"
                    + " ('..' or '/'); a model name is one folder name");
        }
        if (name.equals(".")) {
            throw BackplaneException.invalid("invalid model name '.', a model name must be a folder name, and '.' names the folder"
                    + " it is in; name the model's own folder");
        }
        if (name.indexOf('\0') >= 0 || (BACKSLASH_SEPARATES && name.indexOf('\\') >= 0) || name.length() > MAX_LENGTH) {
            throw BackplaneException.invalid("invalid model name '" + name.replace("\0", "\\0") + "', a model name must be a folder name"
                    + " (no NUL" + (BACKSLASH_SEPARATES ? " or '\\'" : "") + ", at most " + MAX_LENGTH + " characters)");
        }
    }
}
