cd /work/wt/ci
for i in 1 2 3 4 5 6; do
  echo "== run $i $(date +%T)"
  PYTHONPATH=/work/wt/ci timeout 900 /work/main/.venv/bin/python -m pytest -q -p no:cacheprovider tests/replay/test_incremental.py tests/replay/test_job.py --durations=5 2>&1 | tail -12
done
