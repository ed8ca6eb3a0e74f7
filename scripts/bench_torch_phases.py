#!/usr/bin/env python
"""Per-phase step times of the PyTorch reference workload (shared/bench/torch_grpo_step.py):
generate_sequences, compute_ref_log_prob, update_actor, on 2 gloo ranks, no profiler.

Usage: python scripts/bench_torch_phases.py [steps] [warmup]
Prints one JSON object with the per-phase medians (ms) of rank 0 and rank 1.
"""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "shared", "bench"))
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch_grpo_step as ref  # noqa: E402


def timed_step(tr):
    """The reference Trainer.step with a clock around each phase (same operations)."""
    t = {}
    t0 = time.perf_counter()
    base = torch.randint(0, ref.VOCAB, (ref.BATCH // ref.GROUP, ref.PROMPT), generator=tr.gen)
    prompts = base.repeat_interleave(ref.GROUP, 0)
    seq, old_lp = ref.generate(tr.actor, prompts, tr.gen)
    target = (prompts[:, :1] + 1) % ref.VOCAB
    reward = (seq[:, ref.PROMPT:] == target).float().mean(-1)
    r = reward.view(-1, ref.GROUP)
    adv = ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-6)).view(-1, 1)
    t1 = time.perf_counter()
    with torch.no_grad():
        ref_lp = ref.token_logprobs(tr.ref, seq)
    t2 = time.perf_counter()
    lp = ref.token_logprobs(tr.ddp, seq)
    ratio = torch.exp(lp - old_lp)
    pg = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv)
    kl = torch.exp(ref_lp - lp) - (ref_lp - lp) - 1
    loss = (pg + 0.001 * kl).mean()
    tr.opt.zero_grad(set_to_none=True)
    loss.backward()
    tr.opt.step()
    t3 = time.perf_counter()
    return {"gen": t1 - t0, "ref": t2 - t1, "update_actor": t3 - t2, "step": t3 - t0}


def worker(rank, world, steps, warmup, out):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    tr = ref.Trainer(rank)
    for _ in range(warmup):
        tr.step()
    dist.barrier()
    times = [timed_step(tr) for _ in range(steps)]
    med = {k: round(1e3 * statistics.median(x[k] for x in times), 2) for k in times[0]}
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(med, f)
    dist.destroy_process_group()


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    warmup = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    import tempfile
    out = tempfile.mkdtemp()
    mp.spawn(worker, args=(2, steps, warmup, out), nprocs=2)
    res = {f"rank{r}": json.load(open(os.path.join(out, f"rank{r}.json"))) for r in (0, 1)}
    res["torch"] = torch.__version__
    print(json.dumps(res))


if __name__ == "__main__":
    main()
