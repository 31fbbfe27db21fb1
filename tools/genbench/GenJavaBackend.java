package io.backplane.genbench;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ResponseSender;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Spi;
import io.backplane.spi.Tensor;
import java.util.List;

/**
 * The in-process half of tools/genbench.sh: a decoupled Java backend ({@code genjava}) that does
 * what the benchmark's python model does, without the stub. Prompt {@code "burst N"}: N one-word
 * tokens ({@code text_output}) sent back-to-back, then an empty FINAL. Prompt {@code "forever TAG"}:
 * a token every millisecond until the request is cancelled (or 60 s). Compiled and jarred by the
 * script into a --backend-directory; not part of the build.
 */
public final class GenJavaBackend implements BackendFactory {
    @Override
    public String name() {
        return "genjava";
    }

    @Override
    public int spiVersion() {
        return Spi.VERSION;
    }

    @Override
    public Backend create(BackendContext context) {
        return new Backend() {
            @Override
            public Model loadModel(ModelContext ctx) {
                return new Model() {
                    @Override
                    public ModelInstance createInstance(InstanceContext ictx) {
                        return new ModelInstance() {
                            @Override
                            public void execute(List<ScheduledRequest> batch) {
                                for (ScheduledRequest r : batch) {
                                    run(r);
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

    private static void run(ScheduledRequest r) {
        Tensor in = r.request().input("text_input");
        String prompt = in == null ? "" : in.toStringList().get(0);
        String[] words = prompt.trim().split(" ");
        long[] shape = {1};
        if (words[0].equals("burst")) {
            int n = Integer.parseInt(words[1]);
            for (int i = 0; i < n && !r.isCancelled(); i++) {
                r.sender().send(InferenceResponse.of(List.of(Tensor.ofStrings("text_output", shape, " t" + i))), 0);
            }
        } else {
            long deadline = System.nanoTime() + 60_000_000_000L;
            for (int i = 0; !r.isCancelled() && System.nanoTime() < deadline; i++) {
                r.sender().send(InferenceResponse.of(List.of(Tensor.ofStrings("text_output", shape, " t" + i))), 0);
                try {
                    Thread.sleep(1);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
        }
        if (!r.sender().isClosed()) {
            r.sender().send(null, ResponseSender.FINAL);
        }
    }
}
