"""Reference for the Hydra corpus test: compose many cases with Hydra in one process.

Usage: hydra_compose_batch.py < cases.jsonl > results.jsonl
Each input line is {"dir": CONFIG_DIR, "name": CONFIG_NAME, "overrides": [...]} (CONFIG_DIR may be
`pkg://a.b.c`, a config module importable from PYTHONPATH); each output line
is {"ok": TREE} (compose(...) then OmegaConf.to_container(resolve=True), non-finite floats as
the strings "inf", "-inf", "nan", as hydra_compose.py writes them) or {"error": "Type: text"}.
"""
import json
import os
import sys

from hydra import compose, initialize_config_dir, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hydra_compose import finite  # noqa: E402


def one(case):
    GlobalHydra.instance().clear()
    d = case["dir"]
    if d.startswith("pkg://"):
        init = initialize_config_module(config_module=d[len("pkg://"):], version_base=None)
    else:
        init = initialize_config_dir(config_dir=os.path.abspath(d), version_base=None)
    with init:
        cfg = compose(config_name=case["name"], overrides=case["overrides"])
    return finite(OmegaConf.to_container(cfg, resolve=True))


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        case = json.loads(line)
        try:
            out = {"ok": one(case)}
        except BaseException as e:  # noqa: BLE001 - every refusal is a result
            out = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(out, sort_keys=True) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
