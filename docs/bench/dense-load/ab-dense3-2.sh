#!/bin/bash
# the branch at 80bdc6f (check on the compacted copy): dense 100K, BEGen 100K, then main dense 100K again
cd /tmp/dense3
export PATH=/work/main/.venv/bin:$PATH
for run in "d100k new" "b100k new" "d100k main" "d100k new"; do
  set -- $run
  rm -rf st-ab
  echo "== $1 $2 $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  PYTHONPATH=/tmp/dense3/code-$2 /usr/bin/time -f "cpu_user=%U cpu_sys=%S wall=%e peak_kb=%M" python -m tools.cli load --engine python --schema $1/schema.json st-ab $1/subs.jsonl 2>&1 | tail -2
done
