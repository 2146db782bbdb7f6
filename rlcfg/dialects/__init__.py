"""One package per framework dialect (rlcfg.schema.REGISTRY lists them): its sections, what it derives, its rules, its
lowering to the Experiment and its emitter for `rlcfg convert`. docs/architecture.md describes a package's layout.
Nothing outside a dialect's package imports it by name: the registry, the lowering and the converter find it by its
registry entry."""
