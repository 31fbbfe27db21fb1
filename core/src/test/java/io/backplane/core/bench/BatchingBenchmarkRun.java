package io.backplane.core.bench;

import org.junit.jupiter.api.Test;

/**
 * Runs {@link BatchingBenchmark} through surefire (not part of the normal test run: the name does
 * not match the test pattern). {@code ./mvnw -q -B -pl core -am test -Dtest=BatchingBenchmarkRun -Dsurefire.failIfNoSpecifiedTests=false}
 */
class BatchingBenchmarkRun {
    @Test
    void run() throws Exception {
        BatchingBenchmark.run(System.out, Integer.getInteger("bench.seconds", 4));
    }
}
