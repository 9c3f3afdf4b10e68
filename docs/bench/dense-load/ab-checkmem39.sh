#!/bin/bash
# A/B: denseload38 (git archive) against checkmem39 (git archive of b4947f7), alternated;
# CPU = user + sys, peak = max RSS.  Workloads: bexdb gen [--profile dense] --subs 100000 --events 200 (seed 1)
export PATH=/work/main/.venv/bin:$PATH
cd /tmp/checkmem39
out=/tmp/checkmem39/ab.txt
for r in 1 2 3; do
  for w in dense100k b100k; do
    if [ $((r % 2)) = 1 ]; then codes="base branch"; else codes="branch base"; fi
    for code in $codes; do
      rm -rf st-ab
      la=$(cut -d' ' -f1 /proc/loadavg)
      PYTHONPATH=/tmp/checkmem39/$code /usr/bin/time -f "%U %S %M %e" -o t.txt bexdb load --engine python --schema $w/schema.json st-ab $w/subs.jsonl > /dev/null 2>&1
      read u s m e < t.txt
      echo "round $r $w $code cpu $(echo "$u + $s" | bc) user $u sys $s peakMB $((m / 1024)) wall $e load $la $(date -u +%H:%M:%S)" | tee -a $out
    done
  done
done
