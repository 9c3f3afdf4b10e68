#!/bin/bash
# one.sh CODE W [extra args]: one python load under /usr/bin/time; prints CPU (user+sys) and peak (max RSS)
code=$1; w=$2; shift 2
st=/tmp/denseload43/st-$(basename $code)-$$; rm -rf $st
la=$(cut -d' ' -f1 /proc/loadavg)
PYTHONPATH=$code /usr/bin/time -f "%U %S %M %e" -o /tmp/denseload43/t-$$.txt nice -n 5 /work/wt/denseload43/.venv/bin/python -m tools.cli load --engine python "$@" --schema $w/schema.json $st $w/subs.jsonl > /dev/null 2>/tmp/denseload43/err-$$.txt || cat /tmp/denseload43/err-$$.txt
read u s m e < /tmp/denseload43/t-$$.txt
echo "$(basename $code) $(basename $w) $* cpu $(echo "$u + $s" | bc) peakMB $((m / 1024)) wall $e load $la $(date -u +%H:%M:%S) storeMB $(du -sm $st | cut -f1)"
rm -rf $st
