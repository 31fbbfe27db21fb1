/**
 * The embedded host API: {@link io.backplane.core.BackplaneHost} and its builder. A host needs
 * no Guice knowledge; everything else in {@code io.backplane.core.*} is internal.
 */
@NullMarked
package io.backplane.core;

import org.jspecify.annotations.NullMarked;
