#!/bin/sh
# A/B: base (main) and branch alternately, process CPU, same minutes; one match_many of 1,024 (best of 3)
export PATH=/work/main/.venv/bin:$PATH
cd /tmp/richbat
for size in 20k 100k; do
 for round in 1 2; do
  for wl in rich begen b80; do
   for code in base branch; do
    r=$(PYTHONPATH=/tmp/richbat/$code python prof.py s_${wl}${size} ${wl}${size}/events.jsonl many 1024)
    echo "$code $round $(uptime | sed 's/.*average: //') $r"
   done
  done
 done
done
