#!/bin/bash
# catalogw48: online writes on a copy of a batch-built store (built once a side), alternated:
# main (dc7b68a), the branch before (3dc10cf), the branch after; order rotated each round
PY=/work/wt/catalog48/.venv/bin/python
W=${W:-/tmp/denseload41/b100k}
run() {
  case $1 in
    m) PYTHONPATH=/tmp/catalog48/main-tree nice -n 5 $PY /tmp/catalogw48/writes.py $W /tmp/catalogw48/base_m /tmp/catalogw48/w_m ;;
    o) PYTHONPATH=/tmp/catalogw48/old-tree nice -n 5 $PY /tmp/catalogw48/writes.py $W /tmp/catalogw48/base_b /tmp/catalogw48/w_o ;;
    b) nice -n 5 $PY /tmp/catalogw48/writes.py $W /tmp/catalogw48/base_b /tmp/catalogw48/w_b ;;
  esac
}
for r in $(seq 1 ${ROUNDS:-3}); do
  case $((r % 3)) in 1) order="m o b";; 2) order="b m o";; 0) order="o b m";; esac
  for side in $order; do echo "$r $side $(cut -d' ' -f1 /proc/loadavg) $(run $side)"; done
done
