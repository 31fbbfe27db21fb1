/**
 * The {@code fil} backend: XGBoost and LightGBM tree models with Triton FIL's configuration,
 * written the way a third party writes a backend (SPI only; see docs/backends/fil.md).
 */
@NullMarked
package io.backplane.backend.fil;

import org.jspecify.annotations.NullMarked;
