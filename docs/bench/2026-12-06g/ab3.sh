#!/bin/bash
# alternating runs of the 100,000-event job: 35388a8 and 770445a (Python hash and line scan)
for i in 1 2 3 4; do
  for v in base head; do
    d=/work/wt/${v}47
    cd $d && PYTHONPATH=$d /work/main/.venv/bin/python -m benchmarks.replay_throughput --journal /tmp/s45/J100k --json /tmp/s47/ab3/$v-$i.json > /tmp/s47/ab3/$v-$i.txt 2>&1
  done
done
echo done > /tmp/s47/ab3/done
