//! Configuration: verl-compatible YAML, Hydra-style overrides, validation -> plan.
