#!/bin/bash
# one.sh CODE W [keep]: one python load (CLI), prints cpu/peak; keeps the store if $3 given
code=$1; w=$2; keep=$3
st=/tmp/densecompile46/ab/st-$(basename $code)-$(basename $w); rm -rf $st
la=$(cut -d' ' -f1 /proc/loadavg)
PYTHONPATH=$code /usr/bin/time -f "%U %S %M %e" -o /tmp/densecompile46/ab/t-$$.txt nice -n 5 /work/wt/densecompile46/.venv/bin/python -m tools.cli load --engine python --schema $w/schema.json $st $w/subs.jsonl > /dev/null 2>/tmp/densecompile46/ab/err-$$.txt || cat /tmp/densecompile46/ab/err-$$.txt
read u s m e < /tmp/densecompile46/ab/t-$$.txt
echo "$(basename $code) $(basename $w) cpu $(echo "$u + $s" | bc) user $u sys $s peakMB $((m / 1024)) wall $e load $la $(date -u +%H:%M:%S) storeMB $(du -sm $st | cut -f1)"
[ -n "$keep" ] || rm -rf $st
