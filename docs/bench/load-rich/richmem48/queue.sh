#!/bin/bash
# richmem48's A/B queue: one load at a time, the phase harness under time -v, nice 5
cd /tmp/richmem48
run() { # side n tag
  side=$1; n=$2; tag=$3
  if [ $side = main ]; then pp=/tmp/richmem48/main-tree; else pp=/tmp/richmem48/br; fi
  rm -rf st-$side-$n-$tag
  echo "$(date -u +%H:%M:%S) start $side $n $tag load $(cut -d' ' -f1 /proc/loadavg)" >> order.txt
  PYTHONPATH=$pp /usr/bin/time -v nice -n 5 /work/wt/richmem48/.venv/bin/python prof.py w$n st-$side-$n-$tag > prof$n-$side-$tag.txt 2>&1
  echo "$(date -u +%H:%M:%S) end $side $n $tag load $(cut -d' ' -f1 /proc/loadavg)" >> order.txt
}
for job in "$@"; do run $(echo $job | tr ':' ' '); done
