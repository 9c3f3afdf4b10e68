#!/bin/bash
# ab.sh: 3 rounds, main and branch alternated (order flipped each round), 5 workloads
M=/tmp/densecompile46/main-tree; B=/tmp/densecompile46/branch-tree
WS="/tmp/denseload41/dense100k /tmp/densecompile46/dfloat100k-s11 /tmp/denseload41/b100k /tmp/denseload45/dfloat30"
for r in 1 2 3; do
  for w in $WS; do
    if [ $((r % 2)) = 1 ]; then first=$M; second=$B; else first=$B; second=$M; fi
    keep=""; [ $r = 1 ] && keep=keep
    echo "round $r $(/tmp/densecompile46/dc46one.sh $first $w $keep)"
    echo "round $r $(/tmp/densecompile46/dc46one.sh $second $w $keep)"
    if [ $r = 1 ]; then
      n=$(basename $w)
      cmp /tmp/densecompile46/ab/st-main-tree-$n/data.mdb /tmp/densecompile46/ab/st-branch-tree-$n/data.mdb && echo "cmp $n data.mdb identical" || echo "cmp $n DIFFER"
      rm -rf /tmp/densecompile46/ab/st-*-$n
    fi
  done
done
