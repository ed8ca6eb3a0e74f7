#!/usr/bin/env python
"""Per-phase step times of a PyTorch reference GRPO step, at the shapes of
configs/bench_torch_peer.yaml ("tiny") or configs/bench_torch_peer_base.yaml ("base"):
generate_sequences, compute_ref_log_prob, update_actor, on 2 gloo ranks, one thread each,
no profiler.

The workload (our own code, the same operations as shared/bench/torch_grpo_step.py, whose
shapes are "tiny"): a decoder-only transformer (LayerNorm, learned positions, GELU MLP);
  generate_sequences   : sample GEN tokens for BATCH sequences with a KV cache (prefill of the
                         prompt, then single-token decode steps), softmax + multinomial over the
                         whole vocabulary, the sampled tokens' log-probs kept (the old log-probs)
  compute_ref_log_prob : frozen reference copy, full forward, log_softmax + gather, no_grad
  update_actor         : DDP(actor) forward + backward (gradients all-reduced over gloo) + AdamW,
                         PPO-clip loss with group-normalised advantages + low-var KL to the ref

Usage: python scripts/bench_torch_phases.py [steps] [warmup] [tiny|base]
Prints one JSON object with the per-phase medians (ms) of rank 0 and rank 1.
"""
import json
import os
import socket
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

# vocab, d_model, heads, layers, MLP width, prompt, generated, sequences per rank, group
SIZES = {
    "tiny": dict(vocab=32, d=128, heads=4, layers=2, mlp=512, prompt=16, gen=32, batch=32, group=8),
    "base": dict(vocab=8192, d=256, heads=4, layers=4, mlp=1024, prompt=32, gen=32, batch=16,
                 group=8),
}


class Block(nn.Module):
    def __init__(self, s):
        super().__init__()
        d = s["d"]
        self.heads = s["heads"]
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, s["mlp"])
        self.fc2 = nn.Linear(s["mlp"], d)

    def forward(self, x, cache=None, pos=0):
        b, t, c = x.shape
        h = self.heads
        q, k, v = (z.view(b, t, h, c // h).transpose(1, 2)
                   for z in self.qkv(self.ln1(x)).split(c, dim=-1))
        if cache is not None:
            kc, vc = cache
            kc[:, :, pos:pos + t] = k
            vc[:, :, pos:pos + t] = v
            k, v = kc[:, :, :pos + t], vc[:, :, :pos + t]
        # causal over the new positions; a single decode position sees the whole cache
        y = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class LM(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.s = s
        self.tok = nn.Embedding(s["vocab"], s["d"])
        self.pos = nn.Embedding(s["prompt"] + s["gen"], s["d"])
        self.blocks = nn.ModuleList([Block(s) for _ in range(s["layers"])])
        self.ln_f = nn.LayerNorm(s["d"])
        self.head = nn.Linear(s["d"], s["vocab"], bias=False)

    def forward(self, idx, caches=None, pos=0):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(pos, pos + t))
        for i, blk in enumerate(self.blocks):
            x = blk(x, None if caches is None else caches[i], pos)
        return self.head(self.ln_f(x))


def token_logprobs(model, seq, s):
    """log p(seq[:, t+1] | seq[:, :t+1]) at the response positions."""
    logits = model(seq[:, :-1])[:, s["prompt"] - 1:]
    return torch.log_softmax(logits, -1).gather(-1, seq[:, s["prompt"]:].unsqueeze(-1)).squeeze(-1)


@torch.no_grad()
def generate(model, prompts, gen, s):
    b, hd = prompts.shape[0], s["d"] // s["heads"]
    maxt = s["prompt"] + s["gen"]
    caches = [(torch.zeros(b, s["heads"], maxt, hd), torch.zeros(b, s["heads"], maxt, hd))
              for _ in range(s["layers"])]
    logits = model(prompts, caches, 0)[:, -1]
    out, lps = [], []
    pos = prompts.shape[1]
    for t in range(s["gen"]):
        probs = torch.softmax(logits, -1)
        nxt = torch.multinomial(probs, 1, generator=gen)
        lps.append(torch.log(probs.gather(-1, nxt)))
        out.append(nxt)
        if t + 1 < s["gen"]:
            logits = model(nxt, caches, pos)[:, -1]
            pos += 1
    return torch.cat([prompts] + out, 1), torch.cat(lps, 1)


class Trainer:
    def __init__(self, rank, s):
        torch.manual_seed(0)  # identical init on all ranks
        self.s = s
        self.actor = LM(s)
        self.ref = LM(s)
        self.ref.load_state_dict(self.actor.state_dict())
        for p in self.ref.parameters():
            p.requires_grad_(False)
        self.ddp = DDP(self.actor)
        self.opt = torch.optim.AdamW(self.actor.parameters(), lr=1e-4)
        self.gen = torch.Generator().manual_seed(1234 + rank)

    def step(self):
        """One GRPO step with a clock around each phase."""
        s = self.s
        t0 = time.perf_counter()
        base = torch.randint(0, s["vocab"], (s["batch"] // s["group"], s["prompt"]),
                             generator=self.gen)
        prompts = base.repeat_interleave(s["group"], 0)
        seq, old_lp = generate(self.actor, prompts, self.gen, s)
        # rule reward: fraction of response tokens equal to (first prompt token + 1) % vocab
        target = (prompts[:, :1] + 1) % s["vocab"]
        reward = (seq[:, s["prompt"]:] == target).float().mean(-1)
        r = reward.view(-1, s["group"])
        adv = ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-6)).view(-1, 1)
        t1 = time.perf_counter()
        with torch.no_grad():
            ref_lp = token_logprobs(self.ref, seq, s)
        t2 = time.perf_counter()
        lp = token_logprobs(self.ddp, seq, s)
        ratio = torch.exp(lp - old_lp)
        pg = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv)
        kl = torch.exp(ref_lp - lp) - (ref_lp - lp) - 1  # low_var_kl
        loss = (pg + 0.001 * kl).mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()  # DDP all-reduces the gradients over gloo here
        self.opt.step()
        t3 = time.perf_counter()
        return {"gen": t1 - t0, "ref": t2 - t1, "update_actor": t3 - t2, "step": t3 - t0}


def worker(rank, world, steps, warmup, size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    tr = Trainer(rank, SIZES[size])
    for _ in range(warmup):
        tr.step()
    dist.barrier()
    times = [tr.step() for _ in range(steps)]
    med = {k: round(1e3 * statistics.median(x[k] for x in times), 2) for k in times[0]}
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(med, f)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    warmup = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    size = sys.argv[3] if len(sys.argv) > 3 else "tiny"
    if size not in SIZES:
        sys.exit(f"size must be one of {sorted(SIZES)}, not {size!r}")
    out = tempfile.mkdtemp()
    mp.spawn(worker, args=(2, steps, warmup, size, free_port(), out), nprocs=2)
    res = {f"rank{r}": json.load(open(os.path.join(out, f"rank{r}.json"))) for r in (0, 1)}
    res["torch"] = torch.__version__
    res["size"] = size
    print(json.dumps(res))


if __name__ == "__main__":
    main()
