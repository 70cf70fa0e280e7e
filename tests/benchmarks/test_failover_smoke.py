"""The failover benchmark at smoke size, so the harness cannot rot: every scenario, the cluster
modes and the Python floor, real ZooKeeper, real broker processes, result.json in the contract's
shape and a chart, and the client-visible end where a stock client is installed (the newer modes:
test_failover_modes.py)."""
import io
import json
import sys

import pytest
from rich.console import Console

from adapters.cli import main
from adapters.sim import stock_client
from benchmarks import failover, failover_report


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
                events = s["events_of_median_run"]  # the step and journal phases, event type by type
                trigger = {"broker-failure": "BrokersChanged", "controlled-shutdown": "ControlledShutdownRequested",
                           "controller-failover": "ControllerElected"}[scenario]
                assert events[trigger]["count"] >= 1
                if scenario != "controller-failover":  # (a new controller may have nothing to write)
                    assert "PartitionStatesWritten" in events
                else:
                    # here it has: broker 5, the old controller, leaves half the ISRs. The end does
                    # not wait for those writes, and one still in flight then counts up to the end
                    # (the phase used to read 0 whenever the write outlasted the end)
                    writes = s["zk_writes_of_median_run"]
                    assert writes["reported"] + writes["in_flight_at_end"] >= 1, (mode, writes)
                    assert s["phases_ms"]["zk_writes"] > 0, (mode, s["phases_ms"], writes)
                assert set(s["after_end_of_median_run"]) == {"events", "step_ms", "journal_ms", "queue_ms"}
                assert all(e["step_ms"] >= 0 and e["journal_ms"] >= 0 for e in events.values())
                # the median run in time: its end, the trigger's event, and the acknowledgements that
                # ended it (the last one at the end, none of those counted before t0)
                timeline = s["timeline_of_median_run"]
                (end,) = [r for r in timeline if r["what"] == "end"]
                assert min(abs(end["end_ms"] - ms) for ms in s["samples_ms"]) < 0.01  # (one of the runs)
                assert any(r["what"] == "event" and r["name"] == trigger for r in timeline)
                acks = [r for r in timeline if r["what"] == "ack"]
                assert acks and min(abs(r["end_ms"] - end["end_ms"]) for r in acks) < 0.01
                assert all(r["start_ms"] <= r["end_ms"] for r in timeline)
    assert result["environment"]["cpu_count"] >= 1 and result["environment"]["python"]
    # ZooKeeper was warmed up before the first mode (at 300 partitions: the pass cap, 50 passes)
    warm = result["environment"]["zookeeper_warm_up"]["300"]
    assert warm["passes"] == 50 and warm["ops_each"] == 50 * 300
    assert warm["first_write_ms"] > 0 and warm["last_write_ms"] > 0 and warm["seconds"] > 0
    assert "warmed up" in result["note"]
    assert "gc.collect()" in result["note"]
    assert (out / "failover.png").stat().st_size > 1000
    assert (out / "timeline.png").stat().st_size > 1000


def test_bench_controlled_shutdown_restarts_its_victim_between_runs(tmp_path, zk_server, monkeypatch, capsys):
    """The controlled-shutdown victim is a `kctl node` process stopped by SIGTERM: the second
    run needs it started again and leading every partition. Run here as where confluent-kafka
    (a test extra) is not installed: the client-visible end is absent with the reason, not failed."""
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)  # `import confluent_kafka` fails
    out = tmp_path / "bench"
    code = main(["bench", "failover", "--partitions", "100", "--runs", "2", "--out", str(out), "--no-unprepared",
                 "--no-warm-up", "--scenarios", "controlled-shutdown", "--modes", "batched",
                 "--zookeeper", zk_server.connect_string])
    assert code == 0
    result = json.loads((out / "result.json").read_text())
    assert "zookeeper_warm_up" not in result["environment"]  # (--no-warm-up)
    s = result["scenarios"]["controlled-shutdown"]["batched"]
    assert s["runs"] == 2 and all(ms > 0 for ms in s["samples_ms"])
    assert "confluent-kafka is not installed" in result["absent"]["client-visible"]
    assert not any(k.startswith("client_") for k in s)
    assert "client-visible: absent (confluent-kafka is not installed" in capsys.readouterr().out
    assert _cell(result, "controlled-shutdown", "batched", "client-visible") == "absent"
    assert "| absent |" in failover_report.markdown(result)


def _cell(result: dict, scenario: str, mode: str, column: str) -> str:
    """One cell of the printed table (wide enough that no cell is cut)."""
    printed = io.StringIO()
    failover.table(result, Console(file=printed, width=300))
    lines = printed.getvalue().splitlines()
    header = [c.strip() for c in next(line for line in lines if "┃ scenario" in line).split("┃")]
    row = next(line for line in lines if line.startswith("│") and scenario in line and f" {mode} " in line)
    return [c.strip() for c in row.split("│")][header.index(column)]


def test_bench_failover_rejects_bad_flags(capsys):
    assert main(["bench", "failover", "--partitions", "0"]) == 2
    assert main(["bench", "failover", "--partitions", "1000,lots"]) == 2
    assert "error: --partitions takes whole numbers" in capsys.readouterr().err
    assert main(["bench", "failover", "--modes", "warp"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: unknown mode 'warp'")
    assert main(["bench", "failover", "--client-poll-ms", "0"]) == 2
    assert capsys.readouterr().err.strip() == "error: --client-poll-ms must be above 0 and at most 10000"


@pytest.mark.skipif(not stock_client.available(), reason="confluent-kafka (a test extra) is not installed")
def test_a_stock_client_sees_the_new_leaders_after_the_controller_acted(smoke):
    """The client-visible end (librdkafka polling broker 6, a broker process with no replica): in each
    batched run, after the controller learned of the fault (a client cannot see a leader or
    controller the controller has not chosen yet), on the same clock as the end beside it."""
    out, result = smoke
    for scenario, modes in result["scenarios"].items():
        s = modes["batched"]
        seen = s["client_visible_samples_ms"]
        assert len(seen) == 2 and s["client_visible_min_ms"] <= s["client_visible_median_ms"] <= s["client_visible_max_ms"]
        assert s["client_visible_median_ms"] > s["phases_ms"]["watch_delivery"], (scenario, s)
        assert 0 < s["client_visible_unprepared_ms"] < 60_000
        assert s["client_visible_max_ms"] < 60_000, scenario  # the poller's answer, not a timeout's
        assert s["client_broker"] == 6 and s["client_poll_interval_ms"] == 10
        assert s["client_poll_ms"] > 0 and s["client_cpu_ms"] > 0 and s["client_repins"] >= 0
        for mode in ("sequential", "zk-floor"):  # measured in batched and kafka-2.4 only
            assert not any(k.startswith("client_visible") for k in modes[mode]), (scenario, mode)
    assert result["absent"] == {} and result["environment"]["stock_client"].startswith("confluent-kafka")
    median = result["scenarios"]["broker-failure"]["batched"]["client_visible_median_ms"]
    assert _cell(result, "broker-failure", "batched", "client-visible") == f"{median:.0f}"
    assert _cell(result, "broker-failure", "sequential", "client-visible") == "-"
    assert f"| {median:,.0f} (" in failover_report.markdown(result)


def test_a_failing_reference_client_is_reported_and_the_run_goes_on(tmp_path, zk_server, monkeypatch):
    """aiozk-reference is a reference, not a floor: when aiozk fails (its session timed out on
    100,000 concurrent reads in the 2026-11-27 scaling run, the last step of an hour's run), the
    benchmark says so in `skipped` and finishes with the other modes."""
    from benchmarks import floors

    async def failing(*args, **kwargs):
        raise TimeoutError("aiozk session timed out")

    monkeypatch.setattr(floors, "aiozk_reference", failing)
    code = main(["bench", "failover", "--partitions", "100", "--runs", "1", "--out", str(tmp_path),
                 "--scenarios", "controller-failover", "--modes", "zk-floor,aiozk-reference",
                 "--zookeeper", zk_server.connect_string])
    assert code == 0
    result = json.loads((tmp_path / "result.json").read_text())
    assert set(result["scenarios"]["controller-failover"]) == {"zk-floor"}
    assert result["skipped"]["100"] == {"controller-failover aiozk-reference":
                                        "aiozk failed: TimeoutError: aiozk session timed out"}
