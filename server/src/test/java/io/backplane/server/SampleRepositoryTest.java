package io.backplane.server;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.testing.Hygiene;
import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ResponseSender;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.host.ModelMetadata;
import io.backplane.spi.host.ModelState;
import io.backplane.spi.host.ModelStatus;
import io.backplane.spi.host.ResponseObserver;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/**
 * {@code backplane serve} with no options, run from the repository root, serves
 * samples/models: both sample configs parse and load. The models' Python code needs the python
 * backend (tested there); here a Java stand-in registered in code under the name "python"
 * computes what model.py computes, so the configs, the default repository and
 * {@code --backend-config} are checked end to end through the CLI.
 */
class SampleRepositoryTest {
    private static final Path REPO_ROOT = Path.of(System.getProperty("user.dir")).resolve("..").normalize();

    private final StringWriter err = new StringWriter();

    @AfterEach
    void noThreadsLeft() {
        FakeFrontends.reset();
        Hygiene.assertNoBackplaneThreads();
    }

    @Test
    void serve_noOptions_fromRepositoryRoot_servesSamples_addSubAndRepeatDecoupled() throws Exception {
        assertTrue(Files.isDirectory(REPO_ROOT.resolve(ServeCommand.SAMPLES)), REPO_ROOT + " has no samples/models");
        PythonStandIn python = new PythonStandIn();
        CompletableFuture<Server> started = new CompletableFuture<>();
        CompletableFuture<Integer> exit = new CompletableFuture<>();
        CommandLine cl = Main.commandLine(REPO_ROOT, null, b -> b.backend(python), started::complete);
        cl.setErr(new PrintWriter(err, true));
        Thread t = Thread.ofPlatform().name("serve-samples").start(() -> exit.complete(cl.execute("serve", "--http-port", "0", "--grpc-port", "0",
                "--backend-config", "python,shm_initial_bytes=1048576")));
        Server server;
        try {
            server = started.get(60, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new AssertionError("serve did not start: " + err + " exit=" + exit.getNow(null), e);
        }
        try {
            // other samples (e.g. saxpy_cuda) need backends this test does not install: they are reported, not fatal
            List<ModelStatus> index = server.host().repositoryIndex();
            for (String m : List.of("add_sub", "repeat_decoupled")) {
                assertTrue(index.stream().anyMatch(s -> s.name().equals(m) && s.state() == ModelState.READY), m + " not ready: " + index);
            }
            assertEquals(Map.of("shm_initial_bytes", "1048576"), python.options, "--backend-config reaches the backend");

            ModelMetadata md = server.host().metadata("add_sub", InferenceRequest.LATEST);
            assertEquals(List.of("INPUT0", "INPUT1"), md.inputs().stream().map(ModelMetadata.TensorMetadata::name).toList());
            assertEquals(List.of("OUTPUT0", "OUTPUT1"), md.outputs().stream().map(ModelMetadata.TensorMetadata::name).toList());
            assertEquals(List.of(4L), md.inputs().get(0).shape());

            InferenceResponse r = server.host().infer(InferenceRequest.builder("add_sub").input(Tensor.ofFloats("INPUT0", new long[] {4}, 1, 2, 3, 4))
                    .input(Tensor.ofFloats("INPUT1", new long[] {4}, 10, 20, 30, 40)).build()).get(30, TimeUnit.SECONDS);
            assertArrayEquals(new float[] {11, 22, 33, 44}, r.output("OUTPUT0").toFloatArray());
            assertArrayEquals(new float[] {-9, -18, -27, -36}, r.output("OUTPUT1").toFloatArray());

            assertTrue(server.host().modelConfig("repeat_decoupled", InferenceRequest.LATEST).decoupled());
            List<Integer> outs = new CopyOnWriteArrayList<>();
            CompletableFuture<Void> done = new CompletableFuture<>();
            server.host().stream(InferenceRequest.builder("repeat_decoupled").input(Tensor.ofInts("IN", new long[] {3}, 7, 8, 9)).build(),
                    new ResponseObserver() {
                        @Override
                        public void onResponse(InferenceResponse response) {
                            outs.add(response.output("OUT").toIntArray()[0]);
                        }

                        @Override
                        public void onComplete() {
                            done.complete(null);
                        }

                        @Override
                        public void onError(BackplaneException error) {
                            done.completeExceptionally(error);
                        }
                    });
            done.get(30, TimeUnit.SECONDS);
            assertEquals(List.of(7, 8, 9), outs);
        } finally {
            server.close();
        }
        assertEquals(0, exit.get(60, TimeUnit.SECONDS), err.toString());
        t.join(TimeUnit.SECONDS.toMillis(30));
    }

    /** Computes what samples/models/{add_sub,repeat_decoupled}/1/model.py compute. */
    static final class PythonStandIn implements BackendFactory {
        volatile Map<String, String> options = Map.of();

        @Override
        public String name() {
            return "python";
        }

        @Override
        public Backend create(BackendContext context) {
            options = context.options();
            return new Backend() {
                @Override
                public Model loadModel(ModelContext model) {
                    assertTrue(Files.isRegularFile(model.versionDirectory().resolve("model.py")), "model.py in " + model.versionDirectory());
                    String name = model.name();
                    return new Model() {
                        @Override
                        public ModelInstance createInstance(InstanceContext instance) {
                            return new ModelInstance() {
                                @Override
                                public void execute(List<ScheduledRequest> batch) {
                                    for (ScheduledRequest r : batch) {
                                        if (name.equals("add_sub")) {
                                            addSub(r);
                                        } else {
                                            repeat(r);
                                        }
                                    }
                                }

                                @Override
                                public void close() {
                                }
                            };
                        }

                        @Override
                        public void close() {
                        }
                    };
                }

                @Override
                public void close() {
                }
            };
        }

        private static void addSub(ScheduledRequest r) {
            float[] a = r.request().input("INPUT0").toFloatArray();
            float[] b = r.request().input("INPUT1").toFloatArray();
            float[] sum = new float[a.length];
            float[] diff = new float[a.length];
            for (int i = 0; i < a.length; i++) {
                sum[i] = a[i] + b[i];
                diff[i] = a[i] - b[i];
            }
            r.sender().sendFinal(InferenceResponse.of(List.of(Tensor.ofFloats("OUTPUT0", new long[] {4}, sum), Tensor.ofFloats("OUTPUT1", new long[] {4}, diff))));
        }

        private static void repeat(ScheduledRequest r) {
            int[] in = r.request().input("IN").toIntArray();
            for (int i = 0; i < in.length; i++) {
                byte[] idx = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(i).array();
                r.sender().send(InferenceResponse.of(List.of(Tensor.ofInts("OUT", new long[] {1}, in[i]), Tensor.ofRaw("IDX", DataType.UINT32, new long[] {1}, idx))), 0);
            }
            r.sender().send(null, ResponseSender.FINAL);
        }
    }
}
