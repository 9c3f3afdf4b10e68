#!/bin/bash
# richmem48: load W with main and the branch (plain bexdb load, python engine), digest every record
cd /tmp/richmem48
W=$1; tag=$2
for side in main br; do
  if [ $side = main ]; then pp=/tmp/richmem48/main-tree; else pp=/tmp/richmem48/br; fi
  rm -rf cmp-$side-$tag
  PYTHONPATH=$pp /usr/bin/time -f "$side $tag %U %S %M" nice -n 10 /work/wt/richmem48/.venv/bin/python -m tools.cli load --engine python --schema $W/schema.json cmp-$side-$tag $W/subs.jsonl > /dev/null 2>> cmp-$tag.log
  /work/wt/richmem48/.venv/bin/python dump.py cmp-$side-$tag/ > dump-$side-$tag.txt
done
tail -2 cmp-$tag.log; cmp dump-main-$tag.txt dump-br-$tag.txt && echo "$tag: digests equal"
