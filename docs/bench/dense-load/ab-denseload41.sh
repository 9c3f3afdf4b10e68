#!/bin/bash
# A/B: main (git archive of main) against the branch (git archive of BRANCH_COMMIT), alternated, order flipped each round;
# CPU = user + sys, peak = max RSS (/usr/bin/time %M).  Workloads: bexdb gen [--profile dense] --subs 100000 --events 200 (seed 1)
cd /tmp/denseload41
out=${OUT:-/tmp/denseload41/ab.txt}
for r in 1 2 3; do
  for w in dense100k b100k; do
    if [ $((r % 2)) = 1 ]; then codes="main-tree branch"; else codes="branch main-tree"; fi
    for code in $codes; do
      echo "round $r $(./one.sh /tmp/denseload41/$code $w)" | tee -a $out
    done
  done
done
#!/bin/bash
# one.sh CODE W [extra args]: one load, prints cpu/peak
code=$1; w=$2; shift 2
st=/tmp/denseload41/st-$code-$$; rm -rf $st
la=$(cut -d' ' -f1 /proc/loadavg)
PYTHONPATH=$code /usr/bin/time -f "%U %S %M %e" -o /tmp/denseload41/t-$$.txt nice -n 5 /work/wt/denseload41/.venv/bin/bexdb load --engine python "$@" --schema $w/schema.json $st $w/subs.jsonl > /dev/null 2>/tmp/denseload41/err-$$.txt || cat /tmp/denseload41/err-$$.txt
read u s m e < /tmp/denseload41/t-$$.txt
echo "$(basename $code) $w $* cpu $(echo "$u + $s" | bc) user $u sys $s peakMB $((m / 1024)) wall $e load $la $(date -u +%H:%M:%S) storeMB $(du -sm $st | cut -f1)"
rm -rf $st
