#!/bin/sh
# bench match: main (/work/main) and branch (snapshot of richev3 at f8bf321) alternately
export PATH=/work/main/.venv/bin:$PATH
cd /tmp/richev3/bench
run() { # code size
  if [ $1 = main ]; then P=/work/main; else P=/tmp/richev3/br; fi
  echo "$(date -u +%H:%M:%S) start $1 $2 load $(cut -d' ' -f1-3 /proc/loadavg)" >> runs.log
  PYTHONPATH=$P bexdb bench match --workloads begen,rich --sizes $2 --build load --events 1000 --scan-seconds 20 --match-batches 1024 --store-dir /tmp/richev3/bstores --out /tmp/richev3/bench/$1$2 > $1$2.log 2>&1
  echo "$(date -u +%H:%M:%S) end $1 $2 load $(cut -d' ' -f1-3 /proc/loadavg)" >> runs.log
}
run branch 20000
run main 100000
run branch 100000
