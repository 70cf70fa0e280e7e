#!/bin/bash
# alternating runs of the million-event job: base (9335bba) and new (the working tree of /work/main)
for i in 1 2; do
  for v in base new; do
    if [ $v = base ]; then d=/work/wt/base46; else d=/work/main; fi
    cd $d && PYTHONPATH=$d /work/main/.venv/bin/python -m benchmarks.replay_throughput --journal /tmp/s45/J1m --json /tmp/s46/ab-$v-$i.json > /tmp/s46/ab-$v-$i.txt 2>&1
  done
done
echo done > /tmp/s46/ab.done
