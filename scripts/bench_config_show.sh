#!/usr/bin/env bash
# `rlprof config show --json` vs Hydra's compose + OmegaConf resolve on verl 0.9.1's ppo_trainer
# with 10 overrides from verl's GSM8K GRPO example (issue 12's performance figure).
# Needs what .ci/parts/40-hydra.sh prepares: RLPROF_VERL_ROOT, RLPROF_VERL_PKG, RLPROF_HYDRA_PYTHON.
# Usage: scripts/bench_config_show.sh [RUNS]   (from the repository root, after a release build)
set -euo pipefail
runs=${1:-21}
repo=$(pwd)
root=${RLPROF_VERL_ROOT:-/opt/rlprof-verl-0.9.1/root}
pkg=${RLPROF_VERL_PKG:-/opt/rlprof-verl-0.9.1/pkg}
py=${RLPROF_HYDRA_PYTHON:-/opt/rlprof-hydra-venv/bin/python}
ov=(algorithm.adv_estimator=grpo data.train_batch_size=1024 data.max_prompt_length=512
  data.max_response_length=1024 actor_rollout_ref.actor.optim.lr=1e-6
  actor_rollout_ref.actor.ppo_mini_batch_size=256 actor_rollout_ref.actor.use_kl_loss=True
  actor_rollout_ref.rollout.n=5 trainer.n_gpus_per_node=8 trainer.total_epochs=15)
cd "$root"
echo "== whole process: rlprof config show (A) vs python hydra_compose.py (B), $runs pairs"
RLPROF_PKG_PATH=$pkg "$repo/scripts/paired_time.sh" "$runs" \
  "$repo/target/release/rlprof config show --json --config-path verl/trainer/config --config-name ppo_trainer ${ov[*]}" \
  "env PYTHONPATH=$pkg $py $repo/scripts/hydra_compose.py verl/trainer/config ppo_trainer ${ov[*]}"
echo "== Hydra in process: compose + to_container(resolve=True), after imports and a warm-up"
PYTHONPATH=$pkg "$py" - "$runs" "${ov[@]}" <<'PY'
import os, statistics, sys, time
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
n, ov = int(sys.argv[1]), sys.argv[2:]
ts = []
with initialize_config_dir(config_dir=os.path.abspath("verl/trainer/config"), version_base=None):
    for i in range(n + 1):
        t = time.perf_counter()
        OmegaConf.to_container(compose(config_name="ppo_trainer", overrides=ov), resolve=True)
        if i:
            ts.append(time.perf_counter() - t)
print(f"hydra compose+resolve: median {statistics.median(ts)*1e3:.1f} ms "
      f"(min {min(ts)*1e3:.1f}, max {max(ts)*1e3:.1f}, n={n})")
PY
