#!/bin/bash
# controlled shutdown at 10,000 partitions, alternating the harness before (base) and after (new) the end fix
for i in 1 2; do
  for v in base new; do
    if [ $v = base ]; then d=/work/wt/base; else d=/work/main; fi
    (cd $d && PYTHONPATH=$d /work/main/.venv/bin/python -m adapters.cli bench failover --partitions 10000 --runs 5 \
       --scenarios controlled-shutdown --modes batched,kafka-2.4,zk-floor --no-unprepared --no-client \
       --out /work/s48/cs-$v-$i > /work/s48/cs-$v-$i.log 2>&1)
    grep -E "median|over_batched" /work/s48/cs-$v-$i.log | cut -c1-150
  done
done
