#!/bin/bash
# after ab.sh: 1M dense once a side (branch2 first, then main), phase-peak harness; then
# the second shapes (30 attributes, 5 ranges of 20%, int and float; dense seed 11), one pair each.
cd /tmp/denseload45
while kill -0 10915 2>/dev/null; do sleep 5; done
for code in branch2-tree main-tree; do
  st=/tmp/denseload45/st1m-$code; rm -rf $st
  la=$(cut -d' ' -f1 /proc/loadavg); echo "1M $code start load $la $(date -u +%H:%M:%S)" >> ab1m.txt
  PYTHONPATH=/tmp/denseload45/$code /usr/bin/time -f "%U %S %M %e" -o t1m-$code.txt nice -n 5 /work/wt/denseload45/.venv/bin/python prof1m.py /tmp/denseload41/dense1m $st > prof1m-$code.txt 2>&1
  echo "1M $code $(cat t1m-$code.txt) end load $(cut -d' ' -f1 /proc/loadavg) $(date -u +%H:%M:%S) storeMB $(du -sm $st | cut -f1)" >> ab1m.txt
  [ $code = main-tree ] && cmp st1m-branch2-tree/data.mdb st1m-main-tree/data.mdb && echo "1M data.mdb identical" >> ab1m.txt
done
rm -rf st1m-*
for w in /tmp/denseload45/dint30 /tmp/denseload45/dfloat30 /tmp/denseload43/dense100k-s11; do
  for code in main-tree branch2-tree; do
    echo "shape $(./one.sh /tmp/denseload45/$code $w keep)" | tee -a ab2.txt
  done
done
