"""The client-visible end's condition and summary on values (the poller against real brokers:
test_failover_smoke.py and tests/integration/test_kafka_clients.py)."""
from types import SimpleNamespace

from benchmarks.client_visible import satisfied, summarize


def metadata(leaders: dict[str, list[int]], controller: int = 5):
    """A ClusterMetadata's shape: topics -> partitions -> leader."""
    return SimpleNamespace(controller_id=controller, topics={
        t: SimpleNamespace(partitions={p: SimpleNamespace(leader=leader) for p, leader in enumerate(ls)})
        for t, ls in leaders.items()})


def test_every_new_leader_seen_means_every_partition_led_by_a_live_other_broker():
    off = {"leaders_off": 1, "partitions": 4}
    assert satisfied(metadata({"a": [2, 3], "b": [4, 5]}), off)
    assert not satisfied(metadata({"a": [2, 1], "b": [4, 5]}), off)  # one still names the victim
    assert not satisfied(metadata({"a": [2, -1], "b": [4, 5]}), off)  # leaderless: not seen yet
    assert not satisfied(metadata({"a": [2, 3], "b": [4]}), off)  # a partition missing from the answer


def test_a_new_controller_is_any_id_but_the_old_one_and_none():
    assert satisfied(metadata({}, controller=1), {"controller_not": 5})
    assert not satisfied(metadata({}, controller=5), {"controller_not": 5})
    assert not satisfied(metadata({}, controller=-1), {"controller_not": 5})


def test_the_summary_keeps_every_run_and_their_median_min_max():
    run = {"client_poll_interval_ms": 10, "client_broker": 2}
    samples = [{**run, "client_visible_ms": ms, "client_poll_ms": 3.0, "client_cpu_ms": cpu, "client_repins": r}
               for ms, cpu, r in ((120.0, 40.0, 0), (100.0, 30.0, 1), (300.0, 90.0, 0))]
    s = summarize(samples, {"client_visible_ms": 150.0})
    assert s["client_visible_samples_ms"] == [120.0, 100.0, 300.0]
    assert (s["client_visible_median_ms"], s["client_visible_min_ms"], s["client_visible_max_ms"]) == (120.0, 100.0, 300.0)
    assert s["client_visible_unprepared_ms"] == 150.0
    assert s["client_cpu_ms"] == 40.0 and s["client_repins"] == 1 and s["client_broker"] == 2
    assert "client_visible_unprepared_ms" not in summarize(samples, None)


def test_both_charts_draw_the_client_visible_end(tmp_path):
    """The phase chart marks each measured mode's client-visible median; the scaling chart
    draws it as a dotted line per mode."""
    from benchmarks.failover import PHASES, chart, scaling_chart

    def record(ms, client=None):
        s = {"median_ms": ms, "min_ms": ms, "max_ms": ms, "phases_ms": {p: ms / len(PHASES) for p in PHASES}}
        return {**s, "client_visible_median_ms": client} if client else s

    results = {"sizes": [100, 1000], "partitions": 1000, "runs": 1, "environment": {"cpu_count": 2}, "by_partitions": {
        str(n): {"scenarios": {"broker-failure": {"batched": record(n / 2, n / 2 + 30), "zk-floor": record(n / 4)}}}
        for n in (100, 1000)}}
    chart(results, tmp_path / "failover.png")
    scaling_chart(results, tmp_path / "scaling.png")
    assert (tmp_path / "failover.png").stat().st_size > 1000 and (tmp_path / "scaling.png").stat().st_size > 1000
