"""The failover benchmark at smoke size, so the harness cannot rot: every scenario, the cluster
modes and the Python floor, real ZooKeeper, real broker processes, result.json in the contract's
shape and a chart (the newer modes: test_failover_modes.py)."""
import json

import pytest

from adapters.cli import main


@pytest.fixture(scope="module")
def smoke(tmp_path_factory, zk_server):
    out = tmp_path_factory.mktemp("bench")
    code = main(["bench", "failover", "--partitions", "300", "--runs", "2", "--out", str(out),
                 "--modes", "batched,sequential,zk-floor", "--zookeeper", zk_server.connect_string])
    assert code == 0
    return out, json.loads((out / "result.json").read_text())


def test_bench_failover_smoke(smoke):
    out, result = smoke
    assert set(result["scenarios"]) == {"broker-failure", "controlled-shutdown", "controller-failover"}
    assert result["partitions"] == 300 and result["sizes"] == [300]
    for scenario, modes in result["scenarios"].items():
        assert set(modes) == {"batched", "sequential", "zk-floor"}, scenario
        for mode, s in modes.items():
            assert s["partitions"] == 300 and s["runs"] == 2
            assert 0 < s["min_ms"] <= s["median_ms"] <= s["max_ms"]
            assert set(s["phases_ms"]) >= {"watch_delivery", "queue", "step", "journal", "zk_writes", "broker_round_trip"}
            cpu = s["cpu"]  # from t0 to the end of the run; an external ZooKeeper is not measured
            assert cpu["zookeeper_ms"] is None and cpu["controller_process_ms"] >= 0 and cpu["brokers_ms"] >= 0
            assert cpu["total_ms"] == cpu["controller_process_ms"] + cpu["brokers_ms"]
            assert s["peak_rss_mb"] > 10  # this process's high-water mark over the run
            if mode == "zk-floor":
                assert cpu["brokers_ms"] == 0  # the floor runs without a cluster
                assert "unprepared_ms" not in s
            else:  # one more run, started without gc.collect() and the sleep
                assert s["unprepared_ms"] > 0 and set(s["unprepared_phases_ms"]) == set(s["phases_ms"])
    assert result["environment"]["cpu_count"] >= 1 and result["environment"]["python"]
    assert "gc.collect()" in result["note"]
    assert (out / "failover.png").stat().st_size > 1000


def test_no_phase_of_the_product_is_faster_than_its_floor(smoke):
    """Issue 24: the floor is the product's own frames over its own connection, so the phase of
    the product doing the same ZooKeeper work (the writes; in controller-failover the load of
    every state, inside watch_delivery) cannot beat it. aiozk's transactions, the floor before,
    were beaten by the product's write phase at 10,000 partitions."""
    scenarios = smoke[1]["scenarios"]
    for scenario, phase in (("broker-failure", "zk_writes"), ("controlled-shutdown", "zk_writes"),
                            ("controller-failover", "watch_delivery")):
        floor = scenarios[scenario]["zk-floor"]["median_ms"]
        for mode in ("batched", "sequential"):
            product = scenarios[scenario][mode]
            assert product["phases_ms"][phase] >= floor, (scenario, mode, product["phases_ms"], floor)
            assert product["median_ms"] >= floor


def test_bench_controlled_shutdown_restarts_its_victim_between_runs(tmp_path, zk_server):
    """The controlled-shutdown victim is a `kctl node` process stopped by SIGTERM: the second
    run needs it started again and leading every partition."""
    out = tmp_path / "bench"
    code = main(["bench", "failover", "--partitions", "100", "--runs", "2", "--out", str(out), "--no-unprepared",
                 "--scenarios", "controlled-shutdown", "--modes", "batched", "--zookeeper", zk_server.connect_string])
    assert code == 0
    s = json.loads((out / "result.json").read_text())["scenarios"]["controlled-shutdown"]["batched"]
    assert s["runs"] == 2 and all(ms > 0 for ms in s["samples_ms"])


def test_bench_failover_rejects_bad_flags(capsys):
    assert main(["bench", "failover", "--partitions", "0"]) == 2
    assert main(["bench", "failover", "--partitions", "1000,lots"]) == 2
    assert "error: --partitions takes whole numbers" in capsys.readouterr().err
    assert main(["bench", "failover", "--modes", "warp"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: unknown mode 'warp'")
