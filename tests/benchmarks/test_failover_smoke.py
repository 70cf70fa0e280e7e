"""The failover benchmark at smoke size, so the harness cannot rot: every scenario and mode,
real ZooKeeper, real broker processes, result.json in the contract's shape and a chart."""
import json

from adapters.cli import main


def test_bench_failover_smoke(tmp_path, zk_server, capsys):
    out = tmp_path / "bench"
    code = main(["bench", "failover", "--partitions", "100", "--runs", "1", "--out", str(out),
                 "--zookeeper", zk_server.connect_string])
    assert code == 0
    result = json.loads((out / "result.json").read_text())
    assert set(result["scenarios"]) == {"broker-failure", "controlled-shutdown", "controller-failover"}
    for scenario, modes in result["scenarios"].items():
        assert set(modes) == {"batched", "sequential", "zk-floor"}, scenario
        for mode, s in modes.items():
            assert s["partitions"] == 100 and s["runs"] == 1
            assert 0 < s["min_ms"] <= s["median_ms"] <= s["max_ms"]
            assert set(s["phases_ms"]) >= {"watch_delivery", "queue", "step", "journal", "zk_writes", "broker_round_trip"}
            cpu = s["cpu"]  # from t0 to the end of the run; an external ZooKeeper is not measured
            assert cpu["zookeeper_ms"] is None and cpu["controller_process_ms"] >= 0 and cpu["brokers_ms"] >= 0
            assert cpu["total_ms"] == cpu["controller_process_ms"] + cpu["brokers_ms"]
            if mode == "zk-floor":
                assert cpu["brokers_ms"] == 0  # the floor runs without a cluster
    assert result["environment"]["cpu_count"] >= 1 and result["environment"]["python"]
    assert (out / "failover.png").stat().st_size > 1000


def test_bench_controlled_shutdown_restarts_its_victim_between_runs(tmp_path, zk_server):
    """The controlled-shutdown victim is a `kctl node` process stopped by SIGTERM: the second
    run needs it started again and leading every partition."""
    out = tmp_path / "bench"
    code = main(["bench", "failover", "--partitions", "100", "--runs", "2", "--out", str(out),
                 "--scenarios", "controlled-shutdown", "--modes", "batched", "--zookeeper", zk_server.connect_string])
    assert code == 0
    s = json.loads((out / "result.json").read_text())["scenarios"]["controlled-shutdown"]["batched"]
    assert s["runs"] == 2 and all(ms > 0 for ms in s["samples_ms"])


def test_bench_failover_rejects_bad_flags(capsys):
    assert main(["bench", "failover", "--partitions", "0"]) == 2
    assert main(["bench", "failover", "--modes", "warp"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: unknown mode 'warp'")
