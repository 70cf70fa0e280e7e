#!/bin/bash
# alternating runs of the million-event job: 482c86f (session start) and the head decode + list hand-over
for i in 1 2; do
  for v in base49 new49; do
    d=/work/wt/$v
    cd $d && PYTHONPATH=$d /work/main/.venv/bin/python -m benchmarks.replay_throughput --journal /tmp/s45/J1m --json /work/s49/ab/$v-$i.json > /work/s49/ab/$v-$i.txt 2>&1
  done
done
echo done > /work/s49/ab/done
