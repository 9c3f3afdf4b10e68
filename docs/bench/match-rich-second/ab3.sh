#!/bin/sh
# A/B: main (/work/main) and branch (/work/wt/richev3) alternately, process CPU, same minutes
export PATH=/work/main/.venv/bin:$PATH
cd /tmp/richev3
for size in 20k 100k; do
 for round in 3; do
  for code in main branch; do
   if [ $code = main ]; then P=/work/main; else P=/work/wt/richev3; fi
   for wl in rich begen; do
    r=$(PYTHONPATH=$P python tools/prof.py s_${wl}${size} ${wl}${size}/events.jsonl match 600)
    echo "$code $round $(cut -d' ' -f1 /proc/loadavg) $r"
   done
  done
 done
done
