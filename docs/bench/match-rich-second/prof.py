"""Profile/time match and match_many on a store: process CPU."""

import cProfile, json, pstats, sys, time
from betree.index import Index

store, events_path, mode = sys.argv[1], sys.argv[2], sys.argv[3]
n = int(sys.argv[4]) if len(sys.argv) > 4 else 600
evs = [json.loads(l) for l in open(events_path)][: n + 100]
idx = Index.open(store, readonly=True)
warm, evs = evs[:100], evs[100:]
for e in warm:
    idx.match(e)


def run_match():
    return [idx.match(e) for e in evs]


def run_many():
    out = []
    for k in range(0, len(evs), 1024):
        out += idx.match_many(evs[k : k + 1024])
    return out


f = run_many if mode.startswith("many") else run_match
if mode.endswith("prof"):
    cProfile.run("f()", "/tmp/p.out")
    pstats.Stats("/tmp/p.out").sort_stats("tottime").print_stats(35)
    pstats.Stats("/tmp/p.out").sort_stats("cumtime").print_stats(45)
else:
    best = []
    for _ in range(3):
        t = time.process_time()
        r = f()
        best.append(time.process_time() - t)
    b = min(best)
    print(json.dumps({"store": store, "mode": mode, "events": len(evs),
        "ms_per_event": round(1000 * b / len(evs), 4), "ev_per_s": round(len(evs) / b, 1),
        "all": [round(x, 3) for x in best]}))
