#!/bin/bash
# check() alone on one dense 100K store (loaded by denseload38), alternated: CPU = user + sys
export PATH=/work/main/.venv/bin:$PATH
cd /tmp/checkmem39
for r in 1 2 3; do
  if [ $((r % 2)) = 1 ]; then codes="base branch"; else codes="branch base"; fi
  for code in $codes; do
    la=$(cut -d' ' -f1 /proc/loadavg)
    PYTHONPATH=/tmp/checkmem39/$code /usr/bin/time -f "%U %S %M %e" -o t2.txt python chk.py st-base  # chk.py: in ab-check-checkmem39.txt > /dev/null 2>&1
    read u s m e < t2.txt
    echo "round $r check $code cpu $(echo "$u + $s" | bc) user $u sys $s peakMB $((m / 1024)) wall $e load $la $(date -u +%H:%M:%S)" | tee -a ab-check.txt
  done
done
