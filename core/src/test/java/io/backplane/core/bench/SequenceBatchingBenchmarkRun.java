package io.backplane.core.bench;

import org.junit.jupiter.api.Test;

/**
 * Runs {@link SequenceBatchingBenchmark} through surefire (not part of the normal test run: the
 * name does not match the test pattern).
 * {@code ./mvnw -q -B -pl core -am test -Dtest=SequenceBatchingBenchmarkRun -Dsurefire.failIfNoSpecifiedTests=false}
 */
class SequenceBatchingBenchmarkRun {
    @Test
    void run() throws Exception {
        SequenceBatchingBenchmark.run(System.out, Integer.getInteger("bench.seconds", 4));
    }
}
