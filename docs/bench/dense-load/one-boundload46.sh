#!/bin/bash
# one.sh SIDE TREE W STORE: one python load under /usr/bin/time, a line to ab.txt
side=$1; tree=$2; w=$3; st=$4
rm -rf "$st"
cd "$tree" && /usr/bin/time -f "%U %S %M %e" -o /tmp/boundload46/t.$$ env PYTHONPATH="$tree" nice -n 5 /work/wt/boundload46/.venv/bin/python -m tools.cli load --engine python --schema "$w/schema.json" "$st" "$w/subs.jsonl" > /dev/null 2>/tmp/boundload46/err.$$
echo "$(date -u +%H:%M:%S) $side $(basename $w) $(cat /tmp/boundload46/t.$$) load $(cut -d' ' -f1 /proc/loadavg)" >> /tmp/boundload46/ab.txt
