package io.backplane.plugin.http;

import org.jspecify.annotations.Nullable;

/** Handlers that break the REST layering on purpose, for {@link HttpArchitectureTest#restHandlersRule_failsOnABackEdge}. Never served. */
final class BackEdgeFixtures {
    private BackEdgeFixtures() {
    }

    /** Reaches back into the router. */
    static final class RouterCallingHandler implements RestRoute {
        private final @Nullable RestRouter router;

        RouterCallingHandler(@Nullable RestRouter router) {
            this.router = router;
        }

        @Override
        public void serve(RestCall call) {
            if (router != null) {
                router.isSharable();
            }
        }
    }

    /** Delegates to a sibling handler instead of to a shared helper. */
    static final class SiblingCallingHandler implements RestRoute {
        private final StatisticsHandler statistics;

        SiblingCallingHandler(StatisticsHandler statistics) {
            this.statistics = statistics;
        }

        @Override
        public void serve(RestCall call) {
            statistics.serve(call);
        }
    }
}
