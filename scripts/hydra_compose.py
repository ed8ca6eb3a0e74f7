"""Reference for the Hydra consumer test: compose a config with Hydra and print it resolved.

Usage: hydra_compose.py CONFIG_DIR CONFIG_NAME [OVERRIDES...]
Prints one JSON object: Hydra's compose(...) followed by OmegaConf.to_container(resolve=True),
the same tree `rlprof config show --json` prints. Non-finite floats are written as the strings
"inf", "-inf" and "nan" (JSON has no such numbers); the Rust side does the same.
"""
import json
import math
import os
import sys

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf


def finite(v):
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, dict):
        return {k: finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [finite(x) for x in v]
    return v


def main():
    config_dir, name, overrides = sys.argv[1], sys.argv[2], sys.argv[3:]
    with initialize_config_dir(config_dir=os.path.abspath(config_dir), version_base=None):
        cfg = compose(config_name=name, overrides=overrides)
    print(json.dumps(finite(OmegaConf.to_container(cfg, resolve=True)), sort_keys=True))


if __name__ == "__main__":
    main()
