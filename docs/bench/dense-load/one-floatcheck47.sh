#!/bin/bash
# one.sh CODE STORE: bexdb verify (CLI) CPU, read-only store
code=$1; st=$2
la=$(cut -d' ' -f1 /proc/loadavg)
PYTHONPATH=$code /usr/bin/time -f "%U %S %M %e" -o /tmp/floatcheck47/t.txt nice -n 5 /work/wt/floatcheck47/.venv/bin/python -m tools.cli verify $st > /tmp/floatcheck47/v.out 2>&1 || cat /tmp/floatcheck47/v.out
read u s m e < /tmp/floatcheck47/t.txt
echo "$(basename $code) $(basename $st) cpu $(echo "$u + $s" | bc) user $u sys $s peakMB $((m / 1024)) wall $e load $la $(date -u +%H:%M:%S) $(tail -1 /tmp/floatcheck47/v.out)"
