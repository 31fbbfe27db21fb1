/** Internal to the core: no compatibility promise. */
@NullMarked
package io.backplane.core.batch;

import org.jspecify.annotations.NullMarked;
