#!/bin/bash
# catalog49: build/check/store, main (9a02a7b) against the branch, alternated (order flipped each round), stages49.py each
rounds=$1; shift
PY=/work/wt/catalog49/.venv/bin/python
for r in $(seq 1 $rounds); do
  if [ $((r % 2)) = 1 ]; then sides="main branch"; else sides="branch main"; fi
  for w in "$@"; do
    for side in $sides; do
      if [ $side = main ]; then code=/tmp/catalog49/main-tree; else code=${BR:-/tmp/catalog49/branch-tree}; fi
      la=$(cut -d' ' -f1 /proc/loadavg)
      out=/tmp/catalog49/runs/r$r-$side-$(basename $w).txt
      (cd /tmp/catalog49 && PYTHONPATH=$code nice -n 5 $PY /tmp/catalog49/stages49.py $w /tmp/catalog49/runs/st-$side > $out 2>&1)
      echo "round $r $side $(basename $w) load $la $(date -u +%H:%M:%S) $(grep -E '^(build|check) ' $out | awk '{print $1, $3}' | tr '\n' ' ') peak $(grep -oE "VmHWM': [0-9]+" $out | awk '{print $2}' | sort -n | tail -1) store $(du -sm /tmp/catalog49/runs/st-$side/store | cut -f1) MB $(head -1 $out)" | tee -a /tmp/catalog49/runs/ab.txt
      rm -rf /tmp/catalog49/runs/st-$side
    done
  done
done
