import json, time, sys
import numpy as np
from betree.index import Index
from betree.disk import grid
from betree.matching import directkinds
from betree.matching.pages import SCALAR
from pbtree.view import ranges
store, evp = sys.argv[1], sys.argv[2]
N = int(sys.argv[3]) if len(sys.argv) > 3 else 400
idx=Index.open(store,readonly=True)
evs=[json.loads(l) for l in open(evp)][:N+150]
for e in evs[:150]: idx.match(e)
evs=evs[150:]
b=idx.engine.flat._held[1]; v=b.view; types=idx.engine.types; direct=b.grouped
T={}
def add(k,t): T[k]=T.get(k,0)+t
c=time.process_time
with idx.store.read() as txn:
    schema=idx.engine.schema_in(txn)
    for rep in range(2):
      for e in evs:
        t0=c(); values=schema.validate_event(e); add("0 validate", c()-t0)
        t0=c(); sat = np.zeros(b.atoms, dtype=bool); sat[0]=True
        fl=[]
        for attr, value in values.items():
            if types[attr] in SCALAR and attr in v.searches: fl += v.searches[attr].collect(value)
        t1=c(); add("1 collect", t1-t0)
        sat[np.concatenate(fl, dtype=np.intp)] = True
        t2=c(); add("2 scatter", t2-t1)
        held=[];failed=[];undefined=[]
        for attr, group in direct.items():
            if attr in values:
                if group.one is None: group.found(values[attr], values, [], [])
                for kind, index in group.one:
                    t0=c(); ok,gone,tests=index.found(values[attr], values); add("3 d:"+kind,c()-t0)
                    held.append(ok); failed.append(gone)
            else:
                undefined += group.undefined
        t0=c()
        held.append(directkinds.ids(undefined))
        h=directkinds.joined(held); f=directkinds.joined(failed)
        defaults = [g.default.ids for attr, g in direct.items() if attr in values and len(g.default)]
        d=directkinds.joined(defaults)
        sat[d]=True; sat[f]=False; sat[h]=True
        t1=c(); add("4 direct join+set", t1-t0)
        t2=c()
        out = v.match({}, sat)
        t4=c(); add("5 match by key", t4-t2)
n=2*len(evs)
tot=sum(T.values())
print(store, "total", round(tot/n*1e6,1), {k: round(1e6*t/n,1) for k,t in sorted(T.items())})
