package io.backplane.spi.config;

/** Where a model instance runs ({@code instance_group.kind}). */
public enum InstanceKind {
    /** GPU when the model's backend and the machine have one, else CPU. */
    AUTO,
    CPU,
    GPU,
    /** The backend decides placement itself. */
    MODEL
}
