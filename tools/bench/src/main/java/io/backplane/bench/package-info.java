/**
 * {@code backplane bench}: a closed-loop load generator in the spirit of Triton's perf_analyzer.
 * {@link io.backplane.bench.Bench#run(BenchOptions)} sweeps concurrency levels against a REST
 * server, a gRPC server or an embedded host and reports throughput and latency percentiles;
 * {@link io.backplane.bench.OpenAiBench#run(OpenAiOptions)} streams completions from an
 * OpenAI-compatible server and reports time to first token, inter-token latency and output tokens/s.
 */
@NullMarked
package io.backplane.bench;

import org.jspecify.annotations.NullMarked;
