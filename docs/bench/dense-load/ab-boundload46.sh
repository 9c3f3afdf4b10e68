#!/bin/bash
# dense 100K, main (5c4a029 worktree) and branch (git archive of 0fed06e), alternated, order flipped each round
M=/tmp/boundload46/main-tree; B=/tmp/boundload46/br; W=/tmp/denseload41/dense100k
for r in 1 2; do
  if [ $((r % 2)) = 1 ]; then a=main; ta=$M; b=branch; tb=$B; else a=branch; ta=$B; b=main; tb=$M; fi
  /tmp/boundload46/one.sh $a $ta $W /tmp/boundload46/s-d-$a-$r
  /tmp/boundload46/one.sh $b $tb $W /tmp/boundload46/s-d-$b-$r
done
