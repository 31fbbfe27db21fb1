/** Internal to the core: no compatibility promise. */
@NullMarked
package io.backplane.core.internal;

import org.jspecify.annotations.NullMarked;
