package io.backplane.core.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.testing.Hygiene;
import io.backplane.spi.BackendCapabilities;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What the core does with a backend's declared capabilities: KIND_AUTO placement, refusals, platforms and model files. */
class BackendCapabilitiesHostTest {
    private static final BackendCapabilities PREFERS_GPU = BackendCapabilities.builder().preferredInstanceKind(InstanceKind.GPU).build();

    private static ModelConfig.Builder model(String backend) {
        return ModelConfig.builder("m").backend(backend).input(TensorConfig.of("X", DataType.INT32, 1)).output(TensorConfig.of("X_OUT", DataType.INT32, 1));
    }

    /** The kinds the backend was asked for, in kind order: a model's instances start in parallel, in no fixed order. */
    private static List<InstanceKind> kindsFor(HostProbeBackend probe, ModelConfig config) {
        try (BackplaneHost host = BackplaneHost.builder().backend(probe).model(config).build()) {
            assertTrue(host.isModelReady("m"));
            return probe.kinds.stream().sorted().toList();
        } finally {
            Hygiene.assertNoBackplaneThreads();
        }
    }

    @Test
    void kindAuto_gpuPreferredAndDevicePresent_placesOnGpu() {
        assertEquals(List.of(InstanceKind.GPU), kindsFor(new HostProbeBackend("g", PREFERS_GPU, 1), model("g").build()),
                "no instance_group: one instance, on the GPU");
        assertEquals(List.of(InstanceKind.CPU, InstanceKind.GPU, InstanceKind.GPU), kindsFor(new HostProbeBackend("g", PREFERS_GPU, 1),
                model("g").instanceGroup(InstanceGroup.of("a", 2, InstanceKind.AUTO, List.of()))
                        .instanceGroup(InstanceGroup.of("c", 1, InstanceKind.CPU, List.of())).build()),
                "explicit kinds stay as they are");
    }

    @Test
    void kindAuto_gpuPreferredButNoDevice_placesOnCpu() {
        assertEquals(List.of(InstanceKind.CPU), kindsFor(new HostProbeBackend("g", PREFERS_GPU, 0), model("g").build()));
    }

    @Test
    void kindAuto_cpuPreferred_placesOnCpuEvenWithDevices() {
        assertEquals(List.of(InstanceKind.CPU), kindsFor(new HostProbeBackend("c", BackendCapabilities.DEFAULT, 2), model("c").build()));
    }

    @Test
    void decoupledModel_forBackendThatIsNot_refusedBeforeLoad() {
        HostProbeBackend probe = new HostProbeBackend("plain", BackendCapabilities.builder().decoupled(false).build(), 0);
        BackplaneException e = assertThrows(BackplaneException.class, () -> BackplaneHost.builder().backend(probe)
                .modelControlMode(ModelControlMode.EXPLICIT).model(model("plain").decoupled(true).build()).loadModel("m").build());
        assertEquals(ErrorCode.UNSUPPORTED, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("decoupled") && e.getMessage().contains("'plain'"), e.getMessage());
        assertEquals(List.of(), List.copyOf(probe.kinds), "no instance was created");
        Hygiene.assertNoBackplaneThreads();
    }

    @Test
    void batchingModel_forBackendThatDoesNotBatch_refusedNamingTheField() {
        HostProbeBackend probe = new HostProbeBackend("single", BackendCapabilities.builder().batching(false).build(), 0);
        BackplaneException e = assertThrows(BackplaneException.class, () -> BackplaneHost.builder().backend(probe)
                .modelControlMode(ModelControlMode.EXPLICIT).model(model("single").maxBatchSize(8).build()).loadModel("m").build());
        assertEquals(ErrorCode.UNSUPPORTED, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("max_batch_size is 8") && e.getMessage().contains("max_batch_size: 0"), e.getMessage());
        Hygiene.assertNoBackplaneThreads();
    }

    @Test
    void repository_platformAndModelFile_selectTheDeclaringBackend(@TempDir Path repo) throws Exception {
        HostProbeBackend probe = new HostProbeBackend("probe", BackendCapabilities.builder().platforms("probe_platform").modelFileNames("model.probe")
                .build(), 0);
        Files.createDirectories(repo.resolve("byplatform/1"));
        Files.writeString(repo.resolve("byplatform/config.pbtxt"), """
                platform: "probe_platform"
                input [ { name: "X" data_type: TYPE_INT32 dims: [ 1 ] } ]
                output [ { name: "X_OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
                """);
        Files.createDirectories(repo.resolve("byfile/1"));
        Files.writeString(repo.resolve("byfile/1/model.probe"), "x");
        try (BackplaneHost host = BackplaneHost.builder().backend(probe).modelRepository(repo).build()) {
            assertTrue(host.isModelReady("byplatform"));
            assertTrue(host.isModelReady("byfile"));
        }
        Hygiene.assertNoBackplaneThreads();
    }
}
