#!/bin/bash
# A/B main (main-tree, 9e186f5) against denseload45 (git archive, branch-tree), dense and BEGen
# 100K seed 1, alternated, order flipped each round; round 1 keeps the stores (data.mdb compared).
cd /tmp/denseload45
for r in 1 2 3; do
  if [ $((r % 2)) = 1 ]; then codes="main-tree branch-tree"; else codes="branch-tree main-tree"; fi
  for w in dense100k b100k; do
    for code in $codes; do
      echo "round $r $(./one.sh /tmp/denseload45/$code /tmp/denseload41/$w $([ $r = 1 ] && echo keep))" | tee -a ab.txt
    done
  done
done
