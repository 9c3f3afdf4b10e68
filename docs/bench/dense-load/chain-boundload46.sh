#!/bin/bash
# after ab.sh: the branch's 1M dense load with phase peaks, then rich 200K branch (phases), then a rich pair
while pgrep -f /tmp/boundload46/ab.sh > /dev/null; do sleep 5; done
cd /tmp/boundload46
echo "1m start $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> chain.log
rm -rf st-1m-br; PYTHONPATH=/tmp/boundload46/br nice -n 5 /usr/bin/time -v /work/wt/boundload46/.venv/bin/python prof.py /tmp/denseload41/dense1m /tmp/boundload46/st-1m-br > prof-d1m-br.txt 2>&1
echo "1m end $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> chain.log
rm -rf st-r200k-br; PYTHONPATH=/tmp/boundload46/br nice -n 5 /usr/bin/time -v /work/wt/boundload46/.venv/bin/python prof.py /tmp/boundload46/rich200k /tmp/boundload46/st-r200k-br > prof-r200k-br.txt 2>&1
echo "r200k end $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> chain.log
