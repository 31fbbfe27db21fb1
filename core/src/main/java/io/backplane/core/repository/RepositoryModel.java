package io.backplane.core.repository;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.config.ModelConfig;
import java.nio.file.Path;
import java.util.List;

/**
 * One model as read from a repository.
 *
 * @param name model name (its directory name)
 * @param directory the model directory
 * @param config the checked configuration
 * @param servedVersions the versions the version policy selects, increasing, never empty
 * @param availableVersions every numeric version folder present, increasing
 * @param fingerprint the model's fingerprint taken before its files were read (see
 *     {@link ModelRepository#fingerprints()}); a change during the read shows up as a new fingerprint
 * @param files where the model's files may really be (the root it was found in), checked when it was read
 */
public record RepositoryModel(String name, Path directory, ModelConfig config, List<Long> servedVersions, List<Long> availableVersions,
        String fingerprint, FileRoot files) {
    public RepositoryModel {
        requireNonNull(name, "name is null");
        requireNonNull(directory, "directory is null");
        requireNonNull(config, "config is null");
        servedVersions = List.copyOf(servedVersions);
        availableVersions = List.copyOf(availableVersions);
        requireNonNull(fingerprint, "fingerprint is null");
        requireNonNull(files, "files is null");
    }

    /** The folder of {@code version}. */
    public Path versionDirectory(long version) {
        return directory.resolve(Long.toString(version));
    }
}
