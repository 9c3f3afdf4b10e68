#!/bin/bash
# catalog49: online writes on a copy of a batch-built store (built once a side), alternated:
# main (9a02a7b), the merge before this branch's cut (80d7680), the branch after; order rotated each round
PY=/work/wt/catalog49/.venv/bin/python
W=${W:-dense100k}
cd /tmp/catalog49
run() {
  case $1 in
    m) PYTHONPATH=/tmp/catalog49/main-tree nice -n 5 $PY writes.py /tmp/denseload41/$W base_m_$W w_m ;;
    o) PYTHONPATH=/tmp/catalog49/merge-tree nice -n 5 $PY writes.py /tmp/denseload41/$W base_b_$W w_o ;;
    b) PYTHONPATH=${BR:-/tmp/catalog49/branch-tree} nice -n 5 $PY writes.py /tmp/denseload41/$W base_b_$W w_b ;;
  esac
}
for r in $(seq 1 ${ROUNDS:-3}); do
  case $((r % 3)) in 1) order="m o b";; 2) order="b m o";; 0) order="o b m";; esac
  for side in $order; do echo "$r $side $(cut -d' ' -f1 /proc/loadavg) $(date -u +%H:%M:%S) $(run $side)"; done
done
