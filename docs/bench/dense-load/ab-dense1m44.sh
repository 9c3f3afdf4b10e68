#!/bin/bash
# A/B trial43 (git archive, base-tree) against dense1m44 (git archive, branch-tree), dense 100K
# seed 1, alternated, order flipped each round; round 1 keeps the stores (data.mdb compared).
cd /tmp/dense1m44
for r in 1 2 3; do
  if [ $((r % 2)) = 1 ]; then codes="base-tree branch-tree"; else codes="branch-tree base-tree"; fi
  for code in $codes; do
    echo "round $r $(./one.sh /tmp/dense1m44/$code /tmp/denseload41/dense100k $([ $r = 1 ] && echo keep))" | tee -a ab.txt
  done
done
