/**
 * The Backplane backend conformance kit. A backend author extends
 * {@link io.backplane.testkit.BackendConformanceTest}, names the backend, a model it can load
 * ({@link io.backplane.testkit.ConformanceModel}) and its {@link io.backplane.testkit.Capability
 * capabilities}; the kit runs the real core against it and reports, per broken invariant
 * ({@link io.backplane.testkit.Invariant}), which request broke it.
 */
@NullMarked
package io.backplane.testkit;

import org.jspecify.annotations.NullMarked;
