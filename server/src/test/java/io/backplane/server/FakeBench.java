package io.backplane.server;

import java.util.List;

/** Stands in for io.backplane.bench.Bench: records its arguments. */
public final class FakeBench {
    static volatile List<String> lastArgs = List.of();

    private FakeBench() {
    }

    public static void main(String[] args) {
        lastArgs = List.of(args);
        if (lastArgs.contains("--explode")) {
            throw new IllegalArgumentException("bench: unknown option --explode");
        }
    }
}
