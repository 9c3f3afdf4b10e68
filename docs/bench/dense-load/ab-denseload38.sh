#!/bin/bash
# A/B: main (git archive) against the branch, alternated; CPU = user + sys, peak = max RSS.
export PATH=/work/main/.venv/bin:$PATH
out=/tmp/denseload38/ab.txt
for r in 1 2 3; do
  for w in d100k b100k; do
    if [ $((r % 2)) = 1 ]; then codes="main branch"; else codes="branch main"; fi
    for code in $codes; do
      d=/tmp/denseload38/main; [ $code = branch ] && d=/tmp/denseload38/branch
      rm -rf /tmp/denseload38/st-ab
      la=$(cut -d' ' -f1 /proc/loadavg)
      PYTHONPATH=$d /usr/bin/time -f "%U %S %M %e" -o /tmp/denseload38/t.txt bexdb load --engine python --schema $w/schema.json /tmp/denseload38/st-ab $w/subs.jsonl > /dev/null 2>&1
      read u s m e < /tmp/denseload38/t.txt
      echo "round $r $w $code cpu $(echo "$u + $s" | bc) user $u sys $s peakMB $((m / 1024)) wall $e load $la $(date -u +%H:%M:%S)" | tee -a $out
    done
  done
done
