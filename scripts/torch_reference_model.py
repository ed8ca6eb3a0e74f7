#!/usr/bin/env python
"""PyTorch reference of rlprof's decoder (crates/rlprof-trainer/src/model), rerunning one dumped
log-prob stage (`ref_compute_log_prob` or `actor_compute_log_prob`) of one rank under msprobe's
own PrecisionDebugger, so that `msprobe compare` can check rlprof's dump against this golden
dump (docs/precision-debugger.md, "Golden comparison").

Usage: python scripts/torch_reference_model.py RANK_DIR MSPROBE_CONFIG_JSON DUMP_PATH

RANK_DIR is a rank directory that `rlprof train` dumped with RLPROF_PRECISION_GOLDEN=1 in its
environment: besides dump.json it holds rlprof_model.json (the model config),
rlprof_weights.safetensors (the stage's weights) and rlprof_inputs.safetensors / .json (per
forward call k: ids.k, cos.k, sin.k, mask.k, span_index.k, targets.k). msprobe writes its dump
under DUMP_PATH/step0/rank0 (a process without torch.distributed: proc<pid>; renamed rank0).

The model is ours, written with the PyTorch calls whose msprobe records rlprof's dump writes
for its fused kernels (see `expand` in crates/rlprof-trainer/src/model/precision.rs):
  embedding        F.embedding(ids, w)
  RMSNorm          x.pow(2).mean(-1, True); (+ eps); torch.rsqrt; x * r; w * x   (Hugging Face's)
  q/k/v            F.linear(h, w, b)
  RoPE             q * cos + rotate_half(q) * sin  (torch.cat and unary minus: no msprobe record)
  attention        F.scaled_dot_product_attention(q, k, v, mask) on [B, H, T, D] views
  o_proj, down     x + F.linear(h, w)
  SwiGLU           F.silu(F.linear(h, wg)) * F.linear(h, wu)
  LM-head rows     torch.index_select(x.view(B*T, H), 0, rows)
  log-probs        [logits / temperature]; F.log_softmax(logits, -1); torch.gather(., -1, targets)
Layout changes use views msprobe does not record (view, as_strided, contiguous), as our kernels
read their operands in place.
"""
import json
import os
import shutil
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file


def heads_first(x):
    """[B, T, H, D] -> a [B, H, T, D] view (no copy, no msprobe record)."""
    b, t, h, d = x.shape
    s = x.stride()
    return x.as_strided((b, h, t, d), (s[0], s[2], s[1], s[3]))


def rms_norm(x, w, eps):
    var = x.pow(2).mean(-1, True)
    x = x * torch.rsqrt(var + eps)
    return w * x


def rotate_half(x):
    d = x.shape[-1] // 2
    return torch.cat((-x[..., d:], x[..., :d]), -1)


def rope(x, cos, sin):
    return x * cos + rotate_half(x) * sin


def forward_call(cfg, w, inputs, k, temperature):
    """Log-probs of call k's targets: the same computation as rlprof's forward_span +
    token_logprob_only."""
    ids = inputs[f"ids.{k}"]
    cos, sin, mask = inputs[f"cos.{k}"], inputs[f"sin.{k}"], inputs[f"mask.{k}"]
    b, t = ids.shape
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    hidden = cfg["hidden_size"]
    hd = hidden // heads
    eps = cfg["rms_norm_eps"]
    bias = cfg.get("attention_bias")
    if bias is None:
        bias = cfg.get("model_type", "qwen2") == "qwen2"
    if kv_heads != heads:
        raise SystemExit("the reference covers num_key_value_heads == num_attention_heads")
    x = F.embedding(ids, w["model.embed_tokens.weight"])
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}"
        h = rms_norm(x, w[f"{p}.input_layernorm.weight"], eps)
        a = f"{p}.self_attn"

        def proj(name, h=h, a=a):
            args = [w[f"{a}.{name}.weight"]]
            if bias:
                args.append(w[f"{a}.{name}.bias"])
            return F.linear(h, *args)

        q = proj("q_proj").view(b, t, heads, hd)
        kk = proj("k_proj").view(b, t, kv_heads, hd)
        v = proj("v_proj").view(b, t, kv_heads, hd)
        q = rope(q, cos, sin)
        kk = rope(kk, cos, sin)
        o = F.scaled_dot_product_attention(heads_first(q), heads_first(kk), heads_first(v), mask)
        o = heads_first(o).contiguous().view(b, t, hidden)
        x = x + F.linear(o, w[f"{a}.o_proj.weight"])
        h = rms_norm(x, w[f"{p}.post_attention_layernorm.weight"], eps)
        m = f"{p}.mlp"
        g = F.linear(h, w[f"{m}.gate_proj.weight"])
        u = F.linear(h, w[f"{m}.up_proj.weight"])
        x = x + F.linear(F.silu(g) * u, w[f"{m}.down_proj.weight"])
    rows = inputs.get(f"span_index.{k}")
    if rows is not None:
        x = torch.index_select(x.view(b * t, hidden), 0, rows).view(b, -1, hidden)
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    logits = F.linear(x, head)
    if abs(temperature - 1.0) > 1.1920929e-07:
        logits = logits / temperature
    lsm = F.log_softmax(logits, -1)
    return torch.gather(lsm, -1, inputs[f"targets.{k}"])


def main():
    rank_dir, config_path, dump_path = sys.argv[1:4]
    cfg = json.load(open(os.path.join(rank_dir, "rlprof_model.json")))
    meta = json.load(open(os.path.join(rank_dir, "rlprof_inputs.json")))
    w = load_file(os.path.join(rank_dir, "rlprof_weights.safetensors"))
    inputs = load_file(os.path.join(rank_dir, "rlprof_inputs.safetensors"))
    torch.set_num_threads(1)

    from msprobe.pytorch import PrecisionDebugger

    debugger = PrecisionDebugger(config_path=config_path, dump_path=dump_path)
    debugger.start()
    with torch.no_grad():
        out = [forward_call(cfg, w, inputs, k, meta["temperature"]) for k in range(meta["calls"])]
    debugger.stop()
    # one rank directory, as `msprobe compare` wants it
    step = os.path.join(dump_path, "step0")
    procs = [d for d in os.listdir(step) if d.startswith(("proc", "rank"))]
    if len(procs) != 1:
        raise SystemExit(f"expected one rank directory under {step}, found {procs}")
    if procs[0] != "rank0":
        shutil.move(os.path.join(step, procs[0]), os.path.join(step, "rank0"))
    print(json.dumps({"calls": len(out), "logprob_sum": float(sum(o.sum() for o in out))}))


if __name__ == "__main__":
    main()
