#!/bin/bash
# End to end, alternating the session's start (be4146b) and its end, each in its own worktree:
#   /work/wt/old (be4146b) and /work/wt/new (the code under test); results beside this script.
here=$(cd "$(dirname "$0")" && pwd)
for i in 1 2; do for who in old new; do
  dir=/work/wt/$who
  for n in 10000 100000; do
    out=/tmp/s39/e2e-$who-$n-$i
    (cd $dir && PYTHONPATH=$dir timeout 1200 /work/main/.venv/bin/python -m adapters.cli bench failover \
       --partitions $n --runs 3 --scenarios broker-failure,controller-failover --modes batched,zk-floor \
       --no-unprepared --no-client --out $out > $out.log 2>&1)
    cp $out/result.json $here/result-$who-$n-$i.json 2>/dev/null
    grep 'median ' $out.log | sed "s/^/$who $i $(date +%H:%M) /" | tee -a $here/e2e.txt
  done
done; done
