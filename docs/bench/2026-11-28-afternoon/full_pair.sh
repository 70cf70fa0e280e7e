#!/bin/bash
# Full Spark replays of one journal with two checkouts, one after the other, as
#   OLD=/work/wt/old NEW=/work/main J=/tmp/gen1m OUT=/tmp/pairs ./full_pair.sh old new
# (OLD a worktree of the code before, NEW this checkout, whose virtualenv both use); prints each
# run's wall time with start-up, its stages and its step()+digest seconds.
: "${OLD:?}" "${NEW:?}" "${J:?}" "${OUT:=/tmp}"
for who in "$@"; do
  if [ "$who" = old ]; then dir=$OLD; else dir=$NEW; fi
  out=$OUT/full-$who-$(date +%H%M%S)
  (cd $dir && KCTL_SPARK_MASTER='local[2]' PYTHONPATH=$dir $NEW/.venv/bin/python -m benchmarks.replay_throughput --journal $J --out $out/out --json $out.json > $out.log 2>&1)
  python3 -c "
import json,sys;d=json.load(open('$out.json'));s=d['stats']
print('$who', round(d['total_s'],1), {k:round(v,1) for k,v in s['stage_seconds'].items()}, {k:round(v,1) for k,v in s['stage_parts'].items()}, round(s['step_seconds'],1))"
  rm -rf $out
done
