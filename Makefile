# Two commands matter: `make demo` (the tour) and `make test` (the suite CI runs).
# Both create the virtualenv and install the project on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow test-kcat bench soak soak-ensemble test-ensemble-10k clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/kctl demo

# The suite in TEST_WORKERS processes (pytest-xdist), a test file to a worker: most tests wait on
# ZooKeeper, node processes or Spark rather than compute, so two workers on two cores take about
# 8 minutes where one took 13. TEST_WORKERS=0 runs it in this process, as before.
TEST_WORKERS ?= 2
test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --durations=25

# The tests marked `slow` (longer than make test can afford: the Spark local-cluster and
# standalone-cluster jobs, a few planted-fault Spark audits, the incremental and --follow replays,
# the 10,000-partition ensemble fault), not timed as a whole.
test-slow: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -m slow

# kcat (Debian's package) against a live cluster; `make test` skips that file where kcat is absent
test-kcat: $(STAMP)
	command -v kcat >/dev/null || apt-get install -y kcat || (apt-get update && apt-get install -y kcat)
	$(PY) -m pytest -q -p no:cacheprovider tests/integration/test_kcat.py

bench: $(STAMP)
	$(PY) -m benchmarks.core_step

# The ten-minute chaos soak (kctl chaos): 5 nodes, ~1,000 partitions, Spark replay of the journals.
# Everything goes to soak-out/: the console transcript (soak.txt) and the run (run/chaos.json,
# run/nodes/ journals and logs, run/replay/ report). SEED=N repeats a run's decisions.
SEED ?= 1
SOAK_SECONDS ?= 600
soak: $(STAMP)
	rm -rf soak-out && mkdir -p soak-out
	{ $(VENV)/bin/kctl chaos --duration $(SOAK_SECONDS) --seed $(SEED) --partitions 1000 --nodes 5 \
	    --out soak-out/run; echo $$? > soak-out/status; } 2>&1 | tee soak-out/soak.txt
	exit $$(cat soak-out/status)

# The same soak on an embedded three-server ZooKeeper ensemble whose members are also killed,
# paused and restarted (kctl chaos --zookeeper-servers 3). Everything goes to soak-ensemble-out/.
soak-ensemble: $(STAMP)
	rm -rf soak-ensemble-out && mkdir -p soak-ensemble-out
	{ $(VENV)/bin/kctl chaos --duration $(SOAK_SECONDS) --seed $(SEED) --partitions 1000 --nodes 5 \
	    --zookeeper-servers 3 --out soak-ensemble-out/run; echo $$? > soak-ensemble-out/status; } 2>&1 \
	    | tee soak-ensemble-out/soak.txt
	exit $$(cat soak-ensemble-out/status)

# The 10,000-partition broker failure with the controller's ZooKeeper server SIGKILLed in the
# middle of its write, on a three-server ensemble (a `slow` test, not in make test).
# KCTL_ENSEMBLE_FIGURES=FILE appends its measurements to FILE.
test-ensemble-10k: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -s -m slow tests/integration/test_zookeeper_ensemble.py

clean:
	rm -rf $(VENV) build *.egg-info
