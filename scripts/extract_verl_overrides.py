"""Extracts the Hydra override lists of verl's launch scripts into the corpus of
`crates/rlprof-cli/tests/hydra_corpus.rs` (only the override lists, with the script's path and
commit as provenance; no script or YAML is copied).

Usage: extract_verl_overrides.py GIT_DIR PREFIX [GIT_DIR PREFIX ...] > corpus.jsonl

GIT_DIR is a clone (bare or not) of github.com/volcengine/verl or github.com/verl-project/verl-recipe;
PREFIX is the path prefix its scripts get in the corpus (`verl/`, `verl-recipe/`). Each `*.sh`
under examples/, recipe/ and tests/ (the recipe repository: every `*.sh`) is exported to a
temporary directory and run with bash, every command that could do something stubbed (python,
torchrun, ray, rm, pip, git, ...): the stubs record their argument vectors, and every recorded
`python -m MODULE ...` / `torchrun ... -m MODULE` with a Hydra entry point becomes one case:

  {"source": "verl@COMMIT:examples/x/run.sh", "dir": "verl/trainer/config",
   "name": "ppo_trainer", "overrides": [...]}

The config is the one the entry point composes in verl 0.9.1's wheel (`main_ppo`: ppo_trainer,
or the `--config-name` given in `verl/trainer/config`; `sft_trainer`: sft_trainer_engine; the
experimental trainers: their own). A recipe's entry point composes its recipe config, which is
not in the wheel: its overrides are composed on `ppo_trainer`, the config recipes extend.
Invocations of configs not in the wheel (examples' own config directories, `main_generation`)
are left out. Paths of the temporary checkout read `/verl` (the tree) and `/home/user` (HOME).
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile

STUBBED = [
    "python", "python3", "torchrun", "ray", "accelerate", "deepspeed", "nvidia-smi", "npu-smi",
    "pip", "pip3", "uv", "huggingface-cli", "hf", "modelscope", "wget", "curl", "git", "rm",
    "mv", "cp", "ln", "chmod", "chown", "kill", "pkill", "killall", "docker", "ssh", "scp",
    "rsync", "tar", "unzip", "apt", "apt-get", "sudo", "conda", "sleep", "wandb", "mkdir",
    "srun", "sbatch", "mpirun", "nsys", "vllm", "sglang", "ip", "ifconfig", "pgrep", "nohup",
    "dd", "shred", "truncate", "rmdir", "install", "systemctl", "reboot", "shutdown",
]

STUB = """#!{py}
import json, os, sys
with open(os.environ["STUB_LOG"], "a") as f:
    f.write(json.dumps([os.path.basename(sys.argv[0])] + sys.argv[1:]) + "\\n")
if os.path.basename(sys.argv[0]) == "nohup" and len(sys.argv) > 1:
    os.execvp(sys.argv[1], sys.argv[1:])
"""


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def scripts(git_dir, recipe_repo):
    names = run(["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only", "HEAD"]).split("\n")
    for n in names:
        if not n.endswith(".sh"):
            continue
        if recipe_repo or n.split("/")[0] in ("examples", "recipe", "tests"):
            yield n


def cases_of(argv):
    """(module, args after it) of a recorded command line that runs a Hydra entry point."""
    for i, a in enumerate(argv):
        if a == "-m" and i + 1 < len(argv):
            return argv[i + 1], argv[i + 2:]
        if a.endswith(".py") and i > 0 and "/" in a or a.endswith("main_ppo.py"):
            return a, argv[i + 1:]
    return None


TRAINER = "verl/trainer/config"
WHEEL_CONFIGS = {
    TRAINER: {"ppo_trainer", "ppo_megatron_trainer", "sft_trainer_engine"},
}
ENTRY = {
    "verl.trainer.main_ppo": (TRAINER, "ppo_trainer"),
    "verl.trainer.sft_trainer": (TRAINER, "sft_trainer_engine"),
    "verl.experimental.one_step_off_policy.main_ppo":
        ("verl/experimental/one_step_off_policy/config", "one_step_off_ppo_trainer"),
    "verl.experimental.fully_async_policy.fully_async_main":
        ("verl/experimental/fully_async_policy/config", "fully_async_ppo_trainer"),
}


def config_of(module, path, name):
    """(config dir, config name) in verl 0.9.1's wheel, or None."""
    if name is not None and name.endswith(".yaml"):
        name = name[:-5]
    if module in ENTRY:
        d, default = ENTRY[module]
        if path not in (None, "config", "./config"):
            return None
        name = name or default
        if d == TRAINER and name not in WHEEL_CONFIGS[TRAINER]:
            return None
        if d != TRAINER and not name.startswith(default.split("_ppo_")[0]):
            return None
        return d, name
    if module.startswith("recipe.") and path in (None, "config", "./config"):
        return TRAINER, "ppo_trainer"
    return None


def split_args(args):
    path = name = None
    overrides = []
    i = 0
    while i < len(args):
        a = args[i]
        for flag in ("--config-path", "--config-name", "-cp", "-cn"):
            if a == flag and i + 1 < len(args):
                val = args[i + 1]
                i += 1
                break
            if a.startswith(flag + "="):
                val = a[len(flag) + 1:]
                break
        else:
            flag = None
        if flag in ("--config-path", "-cp"):
            path = val
        elif flag in ("--config-name", "-cn"):
            name = val
        elif a.startswith("-"):
            pass
        else:
            overrides.append(a)
        i += 1
    return path, name, overrides


def main():
    args = sys.argv[1:]
    out = []
    py = shutil.which("python3")
    for git_dir, prefix in zip(args[::2], args[1::2]):
        commit = run(["git", "--git-dir", git_dir, "rev-parse", "HEAD"]).strip()
        recipe_repo = "recipe" in prefix
        with tempfile.TemporaryDirectory() as tmp:
            tree = os.path.join(tmp, "tree")
            os.makedirs(tree)
            archive = subprocess.run(["git", "--git-dir", git_dir, "archive", "HEAD"],
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
            stubs = os.path.join(tmp, "stubs")
            os.makedirs(stubs)
            for s in STUBBED:
                p = os.path.join(stubs, s)
                with open(p, "w") as f:
                    f.write(STUB.format(py=py))
                os.chmod(p, os.stat(p).st_mode | stat.S_IEXEC)
            home = os.path.join(tmp, "home")
            os.makedirs(home)
            for script in sorted(scripts(git_dir, recipe_repo)):
                log = os.path.join(tmp, "log")
                open(log, "w").close()
                env = {"PATH": stubs + ":/usr/bin:/bin", "HOME": home, "STUB_LOG": log,
                       "USER": "user", "TMPDIR": tmp}
                try:
                    subprocess.run(["bash", script], cwd=tree, env=env, timeout=20,
                                   stdin=subprocess.DEVNULL, capture_output=True)
                except subprocess.TimeoutExpired:
                    pass
                with open(log) as f:
                    lines = [json.loads(x) for x in f if x.strip()]
                for argv in lines:
                    c = cases_of(argv)
                    if not c:
                        continue
                    module, rest = c
                    path, name, overrides = split_args(rest)
                    target = config_of(module, path, name)
                    if target is None:
                        continue
                    fix = lambda a: a.replace(tree, "/verl").replace(home, "/home/user").replace(tmp, "/tmp")
                    out.append({
                        "source": f"{prefix}@{commit}:{script}",
                        "dir": target[0],
                        "name": target[1],
                        "overrides": [fix(a) for a in overrides],
                    })
    for c in out:
        print(json.dumps(c))


if __name__ == "__main__":
    main()
