#!/bin/bash
# alternate main (8ae603d) and the branch (a9e3046): dense 100K, BEGen 100K, python engine
cd /tmp/dense3
export PATH=/work/main/.venv/bin:$PATH
for w in d100k b100k d100k b100k; do
  for code in main a9e3046; do
    rm -rf st-ab
    echo "== $w $code $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
    PYTHONPATH=/tmp/dense3/code-$code /usr/bin/time -f "cpu_user=%U cpu_sys=%S wall=%e peak_kb=%M" python -m tools.cli load --engine python --schema $w/schema.json st-ab $w/subs.jsonl 2>&1 | tail -2
  done
done
