/** Internal to the core: no compatibility promise. */
@NullMarked
package io.backplane.core.plugin;

import org.jspecify.annotations.NullMarked;
