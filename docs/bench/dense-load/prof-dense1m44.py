"""One python load with phase markers: a sampler thread records max RssAnon/RssFile/RSS per phase."""
import sys, os, time, threading, resource
import betree
print(betree.__file__, flush=True)
from loaders import python_load as PL
from loaders.records import read_jsonl
import betree.disk.bulk as BK, betree.checking.check as C, betree.disk.atomspans as AS
import json
stack = ["read"]
peaks = {}
order = []
def rss():
    d = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile"): d[k] = int(v.split()[0]) // 1024
    return d
def sample():
    while True:
        d = rss(); lab = "/".join(stack)
        p = peaks.setdefault(lab, [0, 0, 0])
        if lab not in order: order.append(lab)
        p[0] = max(p[0], d.get("VmRSS", 0)); p[1] = max(p[1], d.get("RssAnon", 0)); p[2] = max(p[2], d.get("RssFile", 0))
        time.sleep(0.05)
threading.Thread(target=sample, daemon=True).start()
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime
def wrap(obj, name, label=None):
    f = getattr(obj, name); label = label or name
    def g(*a, **k):
        stack.append(label); t = cpu()
        try: return f(*a, **k)
        finally:
            print(f"{'  '*(len(stack)-2)}{label:18s} cpu {cpu()-t:7.2f} exit {rss()}", flush=True)
            stack.pop()
    setattr(obj, name, g)
wrap(BK.Batch, "build"); wrap(BK.Batch, "_intern")
for n in ["key_columns", "parse", "AtomSpans", "write_catalog", "write_atoms"]:
    if hasattr(BK, n): wrap(BK, n)
wrap(BK._Builder, "fill"); wrap(BK._Builder, "write_lnodes"); wrap(BK.PackedSubs, "clause_ids")
wrap(BK.PlaceTable, "from_arrays")
wrap(PL.Index, "check")
for n in ["_read_catalog", "aid_records", "AtomSpans", "scan_atoms", "_check_tree", "_check_clauses", "_check_catalog", "check_adjust", "check_log", "check_metas"]:
    if hasattr(C, n): wrap(C, n)
orig_add = BK.Batch.add_text
first = [True]
def add_text(self, *a, **k):
    if first[0]:
        first[0] = False; stack[:] = ["compile"]
    return orig_add(self, *a, **k)
BK.Batch.add_text = add_text
w, out = sys.argv[1], sys.argv[2]
schema = json.load(open(f"{w}/schema.json"))
t0 = cpu()
s = PL.load(out, read_jsonl(f"{w}/subs.jsonl"), schema, progress=None)
stack[:] = ["end"]; time.sleep(0.2)
print(s)
print("total cpu", round(cpu() - t0, 1), "maxrss MB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
print("phase peaks (VmRSS, RssAnon, RssFile MB):")
for lab in order: print(f"  {lab:45s} {peaks[lab]}")
