#!/bin/bash
# branch-built stores (python load) against the format-2 stores on disk (main's code made them), and dense against a main-built store
B=/work/wt/catalog48/.venv/bin
mkdir -p /tmp/catalog48/same; cd /tmp/catalog48/same
for w in rich20000 begen20000 rich100000 begen100000; do
  rm -rf br-$w
  nice -n 5 $B/bexdb load --engine python --schema /tmp/richev41/$w/schema.json br-$w /tmp/richev41/$w/subs.jsonl > /dev/null 2>&1
  nice -n 5 $B/python /tmp/catalog48/same48.py /tmp/richev41/s_$w br-$w /tmp/richev41/$w/events.jsonl 1500
  rm -rf br-$w
done
w=/tmp/denseload41/dense100k
rm -rf br-d mn-d
nice -n 5 $B/bexdb load --engine python --schema $w/schema.json br-d $w/subs.jsonl > /dev/null 2>&1
PYTHONPATH=/tmp/catalog48/main-tree nice -n 5 $B/python -m tools.cli load --engine python --schema $w/schema.json mn-d $w/subs.jsonl > /dev/null 2>&1 || PYTHONPATH=/tmp/catalog48/main-tree nice -n 5 $B/python -c "import sys; from tools.cli import main; sys.exit(main())" load --engine python --schema $w/schema.json mn-d $w/subs.jsonl
nice -n 5 $B/python /tmp/catalog48/same48.py mn-d br-d $w/events.jsonl 200
