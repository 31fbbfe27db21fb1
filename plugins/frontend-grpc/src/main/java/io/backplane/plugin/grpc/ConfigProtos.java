package io.backplane.plugin.grpc;

import io.backplane.protocol.inference.DataType;
import io.backplane.protocol.inference.ModelConfig;
import io.backplane.protocol.inference.ModelDynamicBatching;
import io.backplane.protocol.inference.ModelEnsembling;
import io.backplane.protocol.inference.ModelInput;
import io.backplane.protocol.inference.ModelInstanceGroup;
import io.backplane.protocol.inference.ModelOutput;
import io.backplane.protocol.inference.ModelParameter;
import io.backplane.protocol.inference.ModelQueuePolicy;
import io.backplane.protocol.inference.ModelRateLimiter;
import io.backplane.protocol.inference.ModelTensorReshape;
import io.backplane.protocol.inference.ModelTransactionPolicy;
import io.backplane.protocol.inference.ModelVersionPolicy;
import io.backplane.spi.config.DynamicBatching;
import io.backplane.spi.config.EnsembleScheduling;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.QueuePolicy;
import io.backplane.spi.config.RateLimiterConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.spi.config.VersionPolicy;
import java.util.List;
import java.util.Map;

/** Backplane's model config as the reduced {@code inference.ModelConfig} message. */
final class ConfigProtos {
    private ConfigProtos() {
    }

    static DataType dataType(io.backplane.spi.DataType t) {
        return DataType.valueOf(t.configName());
    }

    static ModelConfig toProto(io.backplane.spi.config.ModelConfig c) {
        ModelConfig.Builder b = ModelConfig.newBuilder().setName(c.name()).setPlatform(c.platform()).setBackend(c.backend())
                .setMaxBatchSize(c.maxBatchSize()).setDefaultModelFilename(c.defaultModelFilename())
                .setModelTransactionPolicy(ModelTransactionPolicy.newBuilder().setDecoupled(c.decoupled()));
        ModelVersionPolicy.Builder vp = ModelVersionPolicy.newBuilder();
        switch (c.versionPolicy()) {
            case VersionPolicy.Latest l -> vp.setLatest(ModelVersionPolicy.Latest.newBuilder().setNumVersions(l.numVersions()));
            case VersionPolicy.All a -> vp.setAll(ModelVersionPolicy.All.getDefaultInstance());
            case VersionPolicy.Specific s -> vp.setSpecific(ModelVersionPolicy.Specific.newBuilder().addAllVersions(s.versions()));
        }
        b.setVersionPolicy(vp);
        for (TensorConfig t : c.inputs()) {
            ModelInput.Builder i = ModelInput.newBuilder().setName(t.name()).setDataType(dataType(t.dataType())).addAllDims(t.dims())
                    .setOptional(t.optional()).setFormat(format(raw(c, "input", t.name(), "format", "FORMAT_NONE")));
            List<Long> reshape = t.reshape();
            if (reshape != null) {
                i.setReshape(ModelTensorReshape.newBuilder().addAllShape(reshape));
            }
            b.addInput(i);
        }
        for (TensorConfig t : c.outputs()) {
            ModelOutput.Builder o = ModelOutput.newBuilder().setName(t.name()).setDataType(dataType(t.dataType())).addAllDims(t.dims())
                    .setLabelFilename(raw(c, "output", t.name(), "label_filename", ""));
            List<Long> reshape = t.reshape();
            if (reshape != null) {
                o.setReshape(ModelTensorReshape.newBuilder().addAllShape(reshape));
            }
            b.addOutput(o);
        }
        for (InstanceGroup g : c.instanceGroups()) {
            ModelInstanceGroup.Builder ig = ModelInstanceGroup.newBuilder().setName(g.name()).setCount(g.count())
                    .setKind(ModelInstanceGroup.Kind.valueOf("KIND_" + g.kind().name())).addAllGpus(g.gpus());
            RateLimiterConfig rl = g.rateLimiter();
            if (rl != null) {
                ModelRateLimiter.Builder r = ModelRateLimiter.newBuilder()
                        .setPriority(rl.priority());
                for (RateLimiterConfig.Resource res : rl.resources()) {
                    r.addResources(ModelRateLimiter.Resource.newBuilder().setName(res.name()).setGlobal(res.global())
                            .setCount(res.count()));
                }
                ig.setRateLimiter(r);
            }
            b.addInstanceGroup(ig);
        }
        DynamicBatching db = c.dynamicBatching();
        if (db != null) {
            ModelDynamicBatching.Builder d = ModelDynamicBatching.newBuilder().addAllPreferredBatchSize(db.preferredBatchSizes())
                    .setMaxQueueDelayMicroseconds(db.maxQueueDelayMicros()).setPreserveOrdering(db.preserveOrdering())
                    .setPriorityLevels(db.priorityLevels()).setDefaultPriorityLevel(db.defaultPriorityLevel())
                    .setDefaultQueuePolicy(queue(db.defaultQueuePolicy()));
            for (Map.Entry<Integer, QueuePolicy> e : db.priorityQueuePolicy().entrySet()) {
                d.putPriorityQueuePolicy(e.getKey(), queue(e.getValue()));
            }
            b.setDynamicBatching(d);
        }
        boolean cached = c.section("response_cache").flatMap(n -> n.value("enable")).map(v -> v.equals("true") || v.equals("1")).orElse(false);
        if (cached) {
            b.setResponseCache(io.backplane.protocol.inference.ModelResponseCache.newBuilder().setEnable(true));
        }
        for (Map.Entry<String, String> e : c.parameters().entrySet()) {
            b.putParameters(e.getKey(), ModelParameter.newBuilder().setStringValue(e.getValue()).build());
        }
        EnsembleScheduling es = EnsembleScheduling.of(c).orElse(null);
        if (es != null) {
            ModelEnsembling.Builder m = ModelEnsembling.newBuilder();
            for (EnsembleScheduling.Step s : es.steps()) {
                m.addStep(ModelEnsembling.Step.newBuilder().setModelName(s.modelName()).setModelVersion(s.modelVersion())
                        .putAllInputMap(s.inputMap()).putAllOutputMap(s.outputMap()));
            }
            b.setEnsembleScheduling(m);
        }
        return b.build();
    }

    private static ModelInput.Format format(String v) {
        ModelInput.Format f = v.chars().allMatch(Character::isDigit) ? ModelInput.Format.forNumber(Integer.parseInt(v)) : ModelInput.Format.valueOf(v);
        return f == null ? ModelInput.Format.FORMAT_NONE : f;
    }

    /** A field of the {@code input}/{@code output} entry named {@code tensor} in the parsed file, or {@code fallback}. */
    private static String raw(io.backplane.spi.config.ModelConfig c, String section, String tensor, String field, String fallback) {
        for (io.backplane.spi.config.ConfigNode n : c.raw().sections(section)) {
            if (n.value("name").orElse("").equals(tensor)) {
                return n.value(field).orElse(fallback);
            }
        }
        return fallback;
    }

    private static ModelQueuePolicy queue(QueuePolicy p) {
        return ModelQueuePolicy.newBuilder().setTimeoutAction(ModelQueuePolicy.TimeoutAction.valueOf(p.timeoutAction().name()))
                .setDefaultTimeoutMicroseconds(p.defaultTimeoutMicros()).setAllowTimeoutOverride(p.allowTimeoutOverride())
                .setMaxQueueSize(p.maxQueueSize()).build();
    }
}
