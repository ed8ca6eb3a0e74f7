# Hydra consumer: `rlprof config show --json` must equal Hydra's compose(...) +
# OmegaConf.to_container(resolve=True) on verl 0.9.1's own configs
# (crates/rlprof-cli/tests/hydra_consumer.rs, ignored tests run by name), and on the corpus of
# crates/rlprof-cli/tests/hydra_corpus.rs (verl's launch-script override lists, Hydra's grammar
# cases, every verl YAML as the config name): 100% equal or refused by both, summary line printed.
# verl is downloaded without its dependencies and only its YAML tree is used; a stub package
# (empty __init__.py files) makes `pkg://verl.trainer.config` importable without torch.
HYDRA_VENV=/opt/rlprof-hydra-venv
if [ ! -x "$HYDRA_VENV/bin/python" ]; then
  python3 -m venv "$HYDRA_VENV"
fi
"$HYDRA_VENV/bin/pip" install -q hydra-core omegaconf
VERL_DIR=/opt/rlprof-verl-0.9.1
if [ ! -f "$VERL_DIR/root/verl/trainer/config/ppo_trainer.yaml" ]; then
  rm -rf "$VERL_DIR" && mkdir -p "$VERL_DIR/root" "$VERL_DIR/pkg"
  "$HYDRA_VENV/bin/pip" download -q verl==0.9.1 --no-deps -d "$VERL_DIR"
  "$HYDRA_VENV/bin/python" - "$VERL_DIR" <<'PY'
import pathlib, sys, zipfile
d = pathlib.Path(sys.argv[1])
whl = next(d.glob("verl-0.9.1-*.whl"))
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        if n.endswith(".yaml") and (n.startswith("verl/trainer/config/") or "/config/" in n and n.startswith("verl/experimental/")):
            z.extract(n, d / "root")
            if n.startswith("verl/trainer/config/"):
                z.extract(n, d / "pkg")
for p in ["verl", "verl/trainer", "verl/trainer/config"]:
    (d / "pkg" / p / "__init__.py").touch()
PY
fi
export RLPROF_VERL_ROOT="$VERL_DIR/root" RLPROF_VERL_PKG="$VERL_DIR/pkg" RLPROF_HYDRA_PYTHON="$HYDRA_VENV/bin/python"
cargo test --release -p rlprof-cli --test hydra_consumer -- --ignored
cargo test --release -p rlprof-cli --test hydra_corpus -- --ignored --nocapture
