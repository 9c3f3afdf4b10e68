#!/bin/sh
# A/B: main (/work/main) and branch (/work/wt/richev2) alternately, process CPU, same minutes
export PATH=/work/main/.venv/bin:$PATH
cd /tmp/richev
for size in 100k 20k; do
 for round in 1 2; do
  for code in main branch; do
   if [ $code = main ]; then P=/work/main; else P=/work/wt/richev2; fi
   for wl in rich begen; do
    r=$(PYTHONPATH=$P python tools/prof.py s_${wl}${size} ${wl}${size}/events.jsonl match 600)
    echo "$code $round $r"
   done
  done
 done
done
