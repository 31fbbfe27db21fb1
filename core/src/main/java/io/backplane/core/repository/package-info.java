/**
 * Triton-layout model repositories ({@code <root>/<model>/config.pbtxt},
 * {@code <root>/<model>/<version>/...}): scanning, reading and change detection for poll mode.
 */
@NullMarked
package io.backplane.core.repository;

import org.jspecify.annotations.NullMarked;
