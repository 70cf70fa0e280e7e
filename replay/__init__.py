"""The offline audit: controller journals re-executed through the same `step()` and their history
folded and checked, on Spark (`job.py`, `kctl replay`) or in one process (`local.py`); and the
journal generator (`generate.py`). See replay/README.md."""
