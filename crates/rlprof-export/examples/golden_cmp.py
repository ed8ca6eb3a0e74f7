"""Compares two exported trees (see golden.rs): byte-identical, or equal as JSON for traces.

Usage: python golden_cmp.py OLD_TREE NEW_TREE [--drop-empty-flow-args]
--drop-empty-flow-args removes the empty "args" of flow-start events on the OLD side (exports
before commit 9678725 wrote them). Exit status 1 when any file differs, is missing or is extra.
"""
import gzip, json, os, sys
a, b = sys.argv[1], sys.argv[2]
drop = "--drop-empty-flow-args" in sys.argv[3:]
bad = 0; n = 0; exact = 0
for root, _, files in os.walk(a):
    for f in files:
        pa = os.path.join(root, f); rel = os.path.relpath(pa, a); pb = os.path.join(b, rel)
        n += 1
        if not os.path.exists(pb):
            print("MISSING", rel); bad += 1; continue
        da, db = open(pa, 'rb').read(), open(pb, 'rb').read()
        if f.endswith('.gz'):
            da, db = gzip.decompress(da), gzip.decompress(db)
        if f == 'rlprof_analysis.json':
            da = da.replace(a.encode(), b'@'); db = db.replace(b.encode(), b'@')
        if da == db:
            exact += 1; continue
        if f.endswith('.json') or f.endswith('.gz'):
            ja, jb = json.loads(da), json.loads(db)
            # Known change: flow-start events lost their empty "args":{}.
            evs = ja if isinstance(ja, list) else ja.get('traceEvents') if isinstance(ja, dict) else None
            if drop and evs is not None:
                for e in evs:
                    if isinstance(e, dict) and e.get('ph') == 's' and e.get('args') == {}:
                        del e['args']
            if ja == jb:
                continue
        print("DIFF", rel, len(da), len(db)); bad += 1
for root, _, files in os.walk(b):
    for f in files:
        if not os.path.exists(os.path.join(a, os.path.relpath(os.path.join(root, f), b))):
            print("EXTRA", os.path.relpath(os.path.join(root, f), b)); bad += 1
print(f"{n} files, {exact} byte-identical, {bad} differ")
sys.exit(1 if bad else 0)
