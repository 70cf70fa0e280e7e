#!/bin/bash
# alternating runs of the million-event job: 35388a8 (Spark reads) and the Python hash and line scan
for i in 1 2; do
  for v in base hash; do
    d=/work/wt/${v}47
    cd $d && PYTHONPATH=$d /work/main/.venv/bin/python -m benchmarks.replay_throughput --journal /tmp/s45/J1m --json /tmp/s47/ab2/$v-$i.json > /tmp/s47/ab2/$v-$i.txt 2>&1
  done
done
echo done > /tmp/s47/ab2/done
