package io.backplane.core.config;

import io.backplane.spi.BackplaneException;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * The version folders of one model directory. As in Triton, a version folder is a sub-directory
 * whose name is a non-negative integer; other entries are ignored (and reported so the caller can
 * log them).
 *
 * @param versions numeric versions present, increasing
 * @param ignored names of sub-directories that are not numeric, sorted
 */
public record VersionFolders(List<Long> versions, List<String> ignored) {
    private static final Pattern NUMERIC = Pattern.compile("[0-9]{1,18}");

    public VersionFolders {
        versions = List.copyOf(versions);
        ignored = List.copyOf(ignored);
    }

    /**
     * Lists the version folders of {@code modelDir}.
     *
     * @throws BackplaneException INVALID_ARGUMENT when two folders name the same version (e.g. 1 and 01);
     *     NOT_FOUND when {@code modelDir} cannot be listed
     */
    public static VersionFolders scan(Path modelDir) {
        Map<Long, String> byVersion = new HashMap<>();
        List<String> ignored = new ArrayList<>();
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(modelDir)) {
            for (Path p : entries) {
                if (!Files.isDirectory(p)) {
                    continue;
                }
                String name = p.getFileName().toString();
                if (!NUMERIC.matcher(name).matches()) {
                    ignored.add(name);
                    continue;
                }
                String other = byVersion.putIfAbsent(Long.parseLong(name), name);
                if (other != null) {
                    throw BackplaneException.invalid(modelDir + ": version folders '" + other + "' and '" + name
                            + "' both name version " + Long.parseLong(name) + "; remove or rename one");
                }
            }
        } catch (IOException e) {
            throw new BackplaneException(io.backplane.spi.ErrorCode.NOT_FOUND, "cannot list model directory " + modelDir + ": " + e, e);
        }
        ignored.sort(null);
        return new VersionFolders(byVersion.keySet().stream().sorted().toList(), ignored);
    }
}
