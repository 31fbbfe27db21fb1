package io.backplane.server;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.backplane.core.BackplaneHost;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.FrontendFactory;
import io.backplane.spi.metrics.Metric;
import io.backplane.spi.metrics.MetricFamily;
import io.backplane.spi.metrics.MetricFamilySnapshot;
import io.backplane.spi.metrics.MetricKind;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@link FrontendContext#metrics()} from the server: the host's custom-metrics registry, exported beside the models' families. */
class ServerFrontendMetricsTest {
    /** A frontend that counts into a family of its own and closes it when it closes. */
    static final class Counting implements Frontend {
        final MetricFamily family;
        final Metric metric;

        Counting(FrontendContext context) {
            family = context.metrics().family("backplane_test_frontend_events_total", "events the test frontend saw", MetricKind.COUNTER);
            metric = family.metric(Map.of("method", "ModelInfer"));
        }

        @Override
        public void start() {
        }

        @Override
        public String endpoint() {
            return "test://";
        }

        @Override
        public void close() {
            metric.close();
            family.close();
        }
    }

    @Test
    void metrics_aFrontendsFamily_inTheHostsCustomMetrics_goneAfterClose() {
        Counting[] made = new Counting[1];
        FrontendFactory factory = new FrontendFactory() {
            @Override
            public String name() {
                return "counting";
            }

            @Override
            public Frontend create(FrontendContext context) {
                made[0] = new Counting(context);
                return made[0];
            }
        };
        BackplaneHost host = BackplaneHost.builder().build();
        Server server = Server.start(host, List.of(new Server.FrontendSpec("counting", factory, Map.of())));
        try {
            made[0].metric.increment(3);
            List<MetricFamilySnapshot> families = host.customMetrics().stream().filter(f -> f.name().equals("backplane_test_frontend_events_total")).toList();
            assertEquals(1, families.size(), String.valueOf(host.customMetrics()));
            assertEquals(MetricKind.COUNTER, families.getFirst().kind());
            assertEquals(List.of(new MetricFamilySnapshot.Series(Map.of("method", "ModelInfer"), 3, List.of(), List.of())), families.getFirst().series());
        } finally {
            server.close();
        }
        assertEquals(List.of(), host.customMetrics());
    }
}
