package io.backplane.core.config;

import static io.backplane.core.config.ModelConfigValidator.error;

import io.backplane.protocol.inference.ModelConfig;
import io.backplane.protocol.inference.ModelInput;
import io.backplane.protocol.inference.ModelOutput;
import io.backplane.protocol.inference.ModelWarmup;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Checks the Triton fields the core serves beside the scheduling ones: input {@code format},
 * output {@code label_filename}, {@code model_warmup}, {@code response_cache}, and
 * {@code optimization} (accepted with a logged note: its settings are for Triton's own backends).
 * The sections stay in {@link io.backplane.spi.config.ModelConfig#raw()}, where the host reads
 * them at load.
 */
final class ServingSections {
    private static final Logger LOG = LoggerFactory.getLogger(ServingSections.class);

    private ServingSections() {
    }

    static void check(ModelConfig m, SourcePositions at) {
        for (int i = 0; i < m.getInputCount(); i++) {
            ModelInput in = m.getInput(i);
            String path = "input[" + i + "].format";
            if (in.getFormat() == ModelInput.Format.UNRECOGNIZED) {
                throw error(at.at(path), "format", "input '" + in.getName() + "': format " + in.getFormatValue()
                        + " is not FORMAT_NONE, FORMAT_NHWC or FORMAT_NCHW");
            }
            // Triton: an image format describes one image, three dimensions besides the batch one.
            if (in.getFormat() != ModelInput.Format.FORMAT_NONE && in.getDimsCount() != 3) {
                throw error(at.at(path), "format", "input '" + in.getName() + "' has format " + in.getFormat() + " but " + in.getDimsCount()
                        + " dims " + in.getDimsList() + "; " + in.getFormat() + " needs 3 dims (without the batch dimension), or use FORMAT_NONE");
            }
        }
        for (int i = 0; i < m.getOutputCount(); i++) {
            ModelOutput out = m.getOutput(i);
            if (!out.getLabelFilename().isEmpty()) {
                plainFile(out.getLabelFilename(), at.at("output[" + i + "].label_filename"), "label_filename", "output '" + out.getName() + "'");
            }
        }
        checkWarmup(m, at);
        if (m.hasResponseCache() && m.getResponseCache().getEnable() && m.getModelTransactionPolicy().getDecoupled()) {
            throw error(at.at("response_cache"), "response_cache", "a decoupled model's responses are never cached; remove response_cache"
                    + " or model_transaction_policy { decoupled: true }");
        }
        if (m.hasOptimization()) {
            LOG.info("{}: model '{}': field 'optimization' is accepted and not used by Backplane (its settings tune Triton's own"
                    + " backends: graph level, CUDA graphs, accelerators, priority, pinned memory); the model runs as without it",
                    at.at("optimization"), m.getName());
        }
    }

    private static void checkWarmup(ModelConfig m, SourcePositions at) {
        Set<String> names = new HashSet<>();
        for (int i = 0; i < m.getModelWarmupCount(); i++) {
            ModelWarmup w = m.getModelWarmup(i);
            String path = "model_warmup[" + i + "]";
            String where = at.at(path);
            if (w.getName().isEmpty()) {
                throw error(where, "model_warmup.name", "warm-up sample " + i + " has no name; add name: \"...\" (errors name the sample)");
            }
            if (!names.add(w.getName())) {
                throw error(where, "model_warmup.name", "warm-up sample name '" + w.getName() + "' is used twice; give each sample its own name");
            }
            String sample = "warm-up sample '" + w.getName() + "'";
            long batch = Integer.toUnsignedLong(w.getBatchSize());
            long max = Math.max(1, m.getMaxBatchSize());
            if (batch < 1 || batch > max) {
                throw error(at.at(path + ".batch_size"), "model_warmup.batch_size", sample + ": batch_size " + batch + " must be between 1 and "
                        + max + (m.getMaxBatchSize() == 0 ? " (the model does not batch)" : " (max_batch_size)"));
            }
            if (w.getInputsCount() == 0) {
                throw error(where, "model_warmup.inputs", sample + " has no inputs; add inputs { key: \"<input>\" value: { data_type: ... dims: [...]"
                        + " zero_data: true } }");
            }
            for (Map.Entry<String, ModelWarmup.Input> e : w.getInputsMap().entrySet()) {
                String input = sample + " input '" + e.getKey() + "'";
                ModelWarmup.Input in = e.getValue();
                if (in.getDataType() == io.backplane.protocol.inference.DataType.TYPE_INVALID
                        || in.getDataType() == io.backplane.protocol.inference.DataType.UNRECOGNIZED) {
                    throw error(where, "model_warmup.inputs.data_type", input + " has no valid data_type; set e.g. data_type: TYPE_FP32");
                }
                for (long d : in.getDimsList()) {
                    if (d < 1) {
                        throw error(where, "model_warmup.inputs.dims", input + ": dims " + in.getDimsList()
                                + " must all be ≥ 1 (a warm-up sample has a concrete shape)");
                    }
                }
                switch (in.getInputDataTypeCase()) {
                    case ZERO_DATA, RANDOM_DATA -> {
                        if (!in.getZeroData() && !in.getRandomData()) {
                            throw error(where, "model_warmup.inputs", input + ": zero_data/random_data is false; set it to true or give input_data_file");
                        }
                    }
                    case INPUT_DATA_FILE -> plainFile(in.getInputDataFile(), where, "model_warmup.inputs.input_data_file", input);
                    case INPUTDATATYPE_NOT_SET -> throw error(where, "model_warmup.inputs", input
                            + " says nothing about its data; set zero_data: true, random_data: true or input_data_file: \"<file in warmup/>\"");
                }
            }
        }
    }

    private static void plainFile(String name, String where, String field, String what) {
        if (name.contains("\0") || name.isBlank() || Path.of(name).isAbsolute() || Path.of(name).normalize().startsWith("..")) {
            throw error(where, field, what + ": '" + name + "' must be a file name relative to the model directory (no absolute path, no '..')");
        }
    }
}
