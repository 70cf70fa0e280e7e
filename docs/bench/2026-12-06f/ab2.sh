#!/bin/bash
# alternating runs of the million-event job: HEAD 66c0bee (one task per unit) and the same with fold units packed into tasks
for i in 1 2; do
  for v in head pack; do
    if [ $v = head ]; then d=/work/wt/base46b; else d=/work/wt/pack46; fi
    cd $d && PYTHONPATH=$d /work/main/.venv/bin/python -m benchmarks.replay_throughput --journal /tmp/s45/J1m --json /tmp/s46/ab2-$v-$i.json > /tmp/s46/ab2-$v-$i.txt 2>&1
  done
done
echo done > /tmp/s46/ab2.done
