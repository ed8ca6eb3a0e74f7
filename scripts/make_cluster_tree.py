#!/usr/bin/env python3
"""Build an N-rank torch_npu tree from real-shaped rank directories, for cluster-scale benchmarks.

Usage: scripts/make_cluster_tree.py SRC OUT N

SRC holds torch_npu rank directories (`rank0_ascend_pt`, `rank1_ascend_pt`, ...: the DB layout with
`ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_{r}.db`, or the text layout). Rank i of OUT is a
copy of source rank i mod len(SRC), with its rank id rewritten everywhere torch_npu writes one:
the directory name, `profiler_info_{r}.json` (`rank_id`), `profiler_metadata.json`
(`distributed_args.rank` / `world_size`), the DB's file name, `RANK_DEVICE_MAP.rankId` and, where
present, a `distributed_args` entry of `META_DATA`. The world size becomes N. Nothing else changes,
so every rank keeps the real timings of its source (the tree is real-shaped, not real).
Writes only under OUT, which must not exist. Standard library only.
"""
import json
import os
import re
import shutil
import sqlite3
import sys


def rank_dirs(src):
    found = []
    for name in os.listdir(src):
        m = re.match(r"rank(\d+)_ascend_pt$", name)
        if m and os.path.isdir(os.path.join(src, name)):
            found.append((int(m.group(1)), name))
    if not found:
        sys.exit(f"no rank*_ascend_pt directory in {src}")
    return [name for _, name in sorted(found)]


def rewrite_json(path, fn):
    with open(path) as f:
        doc = json.load(f)
    fn(doc)
    with open(path, "w") as f:
        json.dump(doc, f)


def set_distributed(doc, rank, world):
    args = doc.get("distributed_args")
    if isinstance(args, dict):
        args["rank"] = rank
        args["world_size"] = world


def rewrite_db(path, rank, world):
    con = sqlite3.connect(path)
    try:
        tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
        if "RANK_DEVICE_MAP" in tables:
            con.execute("update RANK_DEVICE_MAP set rankId = ?", (rank,))
        if "META_DATA" in tables:
            row = con.execute("select value from META_DATA where name = 'distributed_args'").fetchone()
            if row:
                doc = json.loads(row[0])
                set_distributed({"distributed_args": doc}, rank, world)
                con.execute(
                    "update META_DATA set value = ? where name = 'distributed_args'",
                    (json.dumps(doc),),
                )
        con.commit()
    finally:
        con.close()


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    src, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if os.path.exists(out):
        sys.exit(f"{out} exists")
    sources = rank_dirs(src)
    os.makedirs(out)
    for i in range(n):
        name = sources[i % len(sources)]
        old = int(re.match(r"rank(\d+)_", name).group(1))
        dst = os.path.join(out, f"rank{i}_ascend_pt")
        # A DB's -wal file may hold committed pages: it is copied (and renamed) with its DB, and
        # rewriting the DB checkpoints it.
        shutil.copytree(os.path.join(src, name), dst)
        for root, _dirs, files in os.walk(dst):
            for f in files:
                new = re.sub(rf"_{old}(\.(db|db-wal|db-shm|json))$", rf"_{i}\1", f)
                if new != f:
                    os.rename(os.path.join(root, f), os.path.join(root, new))
                p = os.path.join(root, new)
                if re.match(r"profiler_info_\d+\.json$", new):
                    rewrite_json(p, lambda d: d.__setitem__("rank_id", i))
                elif new == "profiler_metadata.json":
                    rewrite_json(p, lambda d: set_distributed(d, i, n))
                elif re.match(r"ascend_pytorch_profiler_\d+\.db$", new):
                    rewrite_db(p, i, n)
    print(f"{n} ranks from {len(sources)} source ranks in {out}")


if __name__ == "__main__":
    main()
