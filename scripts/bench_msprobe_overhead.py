#!/usr/bin/env python
"""msprobe's own cost on the PyTorch reference workload (scripts/bench_torch_phases.py at its tiny
size, the shapes of configs/bench_torch_peer.yaml): per-phase step times of compute_ref_log_prob and
update_actor with msprobe's PrecisionDebugger dumping both (task statistics, level L1, as verl's
precision_debugger tool starts it around a stage) against the same steps without it, on 2 gloo
ranks. Steps alternate off / on so that the machine's drift hits both alike.

Usage: python scripts/bench_msprobe_overhead.py [pairs] [warmup]
Prints one JSON object: per rank, the median ms of ref, update_actor and their sum, off and on.
"""
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import bench_torch_phases as ref  # noqa: E402

S = ref.SIZES["tiny"]


def step(tr, dbg):
    """The reference Trainer.step; `dbg` (or None) dumps the ref pass and the update."""
    base = torch.randint(0, S["vocab"], (S["batch"] // S["group"], S["prompt"]), generator=tr.gen)
    prompts = base.repeat_interleave(S["group"], 0)
    seq, old_lp = ref.generate(tr.actor, prompts, tr.gen, S)
    target = (prompts[:, :1] + 1) % S["vocab"]
    reward = (seq[:, S["prompt"]:] == target).float().mean(-1)
    r = reward.view(-1, S["group"])
    adv = ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-6)).view(-1, 1)
    t1 = time.perf_counter()
    if dbg:
        dbg.start(tr.ref)
    with torch.no_grad():
        ref_lp = ref.token_logprobs(tr.ref, seq, S)
    if dbg:
        dbg.stop()
    t2 = time.perf_counter()
    if dbg:
        dbg.start(tr.ddp)
    lp = ref.token_logprobs(tr.ddp, seq, S)
    ratio = torch.exp(lp - old_lp)
    pg = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv)
    kl = torch.exp(ref_lp - lp) - (ref_lp - lp) - 1
    loss = (pg + 0.001 * kl).mean()
    tr.opt.zero_grad(set_to_none=True)
    loss.backward()
    tr.opt.step()
    if dbg:
        dbg.stop()
        dbg.step()
    t3 = time.perf_counter()
    return {"ref": t2 - t1, "update_actor": t3 - t2, "ref+update": t3 - t1}


def worker(rank, world, pairs, warmup, out):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29534")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from msprobe.pytorch import PrecisionDebugger

    cfg = os.path.join(out, "config.json")
    if rank == 0:
        with open(cfg, "w") as f:
            json.dump({"task": "statistics", "level": "L1", "rank": [], "step": [],
                       "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                      "summary_mode": "statistics"}}, f)
    dist.barrier()
    dbg = PrecisionDebugger(config_path=cfg, dump_path=os.path.join(out, "dump"))
    tr = ref.Trainer(rank, S)
    for _ in range(warmup):
        step(tr, None)
        step(tr, dbg)
    dist.barrier()
    times = {"off": [], "on": []}
    for _ in range(pairs):
        times["off"].append(step(tr, None))
        times["on"].append(step(tr, dbg))
    med = {mode: {k: round(1e3 * statistics.median(x[k] for x in ts), 2) for k in ts[0]}
           for mode, ts in times.items()}
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(med, f)
    dist.destroy_process_group()


def main():
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    warmup = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    out = tempfile.mkdtemp()
    mp.spawn(worker, args=(2, pairs, warmup, out), nprocs=2)
    res = {f"rank{r}": json.load(open(os.path.join(out, f"rank{r}.json"))) for r in (0, 1)}
    res["torch"] = torch.__version__
    print(json.dumps(res))


if __name__ == "__main__":
    main()
