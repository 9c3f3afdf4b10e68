#!/bin/bash
# ab48.sh ROUNDS WORKLOADS...: alternate main and branch (order flipped each round), stages48.py each
rounds=$1; shift
for r in $(seq 1 $rounds); do
  if [ $((r % 2)) = 1 ]; then sides="main branch"; else sides="branch main"; fi
  for w in "$@"; do
    for side in $sides; do
      if [ $side = main ]; then code=/tmp/catalog48/main-tree; else code=/work/wt/catalog48; fi
      la=$(cut -d' ' -f1 /proc/loadavg)
      out=/tmp/catalog48/runs/r$r-$side-$(basename $w).txt
      PYTHONPATH=$code nice -n 5 /work/wt/catalog48/.venv/bin/python /tmp/catalog48/stages48.py $w /tmp/catalog48/runs/st-$side > $out 2>&1
      echo "round $r $side $(basename $w) load $la $(date -u +%H:%M:%S) $(grep -E '^(build|check) ' $out | awk '{print $1, $3}' | tr '\n' ' ') peak $(grep -oE "VmHWM': [0-9]+" $out | awk '{print $2}' | sort -n | tail -1) raw $(grep 'raw MB' $out)" | tee -a /tmp/catalog48/runs/ab.txt
      rm -rf /tmp/catalog48/runs/st-$side
    done
  done
done
