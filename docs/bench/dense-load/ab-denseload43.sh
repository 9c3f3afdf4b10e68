#!/bin/bash
# A/B: main (git archive of main 381f85e) against the branch (git archive of the commit in ./branch),
# alternated, order flipped each round; CPU = user + sys, peak = max RSS (/usr/bin/time %M), default --memory-budget.
# Workloads: /tmp/denseload41/{dense100k,b100k} (bexdb gen [--profile dense] --subs 100000 --events 200, seed 1)
cd /tmp/denseload43
out=${OUT:-/tmp/denseload43/ab.txt}
for r in ${ROUNDS:-1 2 3}; do
  for w in ${WS:-/tmp/denseload41/dense100k /tmp/denseload41/b100k}; do
    if [ $((r % 2)) = 1 ]; then codes="main-tree branch"; else codes="branch main-tree"; fi
    for code in $codes; do
      echo "round $r $(./one-denseload43.sh /tmp/denseload43/$code $w)" | tee -a $out
    done
  done
done
