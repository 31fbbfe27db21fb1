/**
 * The Backplane backend conformance kit. A backend author extends
 * {@link io.backplane.testkit.BackendConformanceTest}, names the backend, a model it can load
 * ({@link io.backplane.testkit.ConformanceModel}) and its {@link io.backplane.testkit.Capability
 * capabilities}; the kit runs the real core against it and reports, per broken invariant
 * ({@link io.backplane.testkit.Invariant}), which request broke it.
 *
 * <p>For white-box tests, {@link io.backplane.testkit.ModelHarness} serves one model with the
 * backend inside the real core and reaches the backend's own objects;
 * {@link io.backplane.testkit.IdentityBackendFactory} is the do-nothing backend that benchmarks
 * and tests of the core use.
 */
@NullMarked
package io.backplane.testkit;

import org.jspecify.annotations.NullMarked;
