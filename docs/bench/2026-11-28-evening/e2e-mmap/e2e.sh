#!/bin/bash
cd /work/main
for i in 1 2; do for mode in plain mmap; do
  if [ $mode = mmap ]; then export MALLOC_MMAP_THRESHOLD_=524288; else unset MALLOC_MMAP_THRESHOLD_; fi
  timeout 900 .venv/bin/kctl bench failover --partitions 100000 --runs 3 --scenarios broker-failure --modes batched --no-unprepared --no-client --out /tmp/s38/e2e-$mode-$i > /tmp/s38/e2e-$mode-$i.log 2>&1
  echo "$mode $i $(date +%H:%M) $(grep 'median ' /tmp/s38/e2e-$mode-$i.log | head -1)"
done; done
