"""The chaos soak, short: a minute of seeded faults and admin work on five real node processes
behind their own proxies, on an embedded ZooKeeper of its own (the run restarts it), then every
check must pass. Seed 7 draws the operator faults and operations too: failed log dirs,
throttled reassignments and their verify, topic config changes. The ten-minute run is
`make soak`."""
from __future__ import annotations

import json
import os

from adapters.journal.format import read_journal
from adapters.sim.chaos.config import ChaosConfig, stream
from adapters.sim.chaos.faults import Claims, Faults
from adapters.sim.chaos.fleet import Fleet
from adapters.cli import main

DURATION = os.environ.get("KCTL_CHAOS_TEST_DURATION", "50")


def test_a_short_chaos_run_passes_every_check(tmp_path, capsys):
    out = tmp_path / "chaos"
    code = main(["chaos", "--duration", DURATION, "--seed", "7", "--partitions", "200", "--out", str(out),
                 "--replay", "local", "--fault-interval", "2.5", "--settle-timeout", "90"])
    report = json.loads((out / "chaos.json").read_text())
    failing = {c["name"]: c for c in report["checks"] if not c["ok"]}
    assert code == 0, f"failed checks (files in {out}): {json.dumps(failing, indent=1)}"
    assert report["passed"] and report["violations"] == 0
    assert [c["name"] for c in report["checks"]] == ["cluster", "leaders", "reassignments", "deletions", "metadata",
                                                    "kafka-client", "throttles", "log-dirs", "replay", "processes",
                                                    "log-dir-failures"]
    # the run did break things and did admin work, through every path
    assert sum(report["faults"].values()) >= 10, report["faults"]
    assert len(report["faults"]) >= 5, report["faults"]
    ok = {kind: outcomes.get("ok", 0) for kind, outcomes in report["admin"].items()}
    assert sum(ok.values()) >= 10 and len([k for k, n in ok.items() if n]) >= 4, report["admin"]
    # the operator's side: a disk failed and was handled, a throttle was set and verified away,
    # topic configs changed
    assert report["faults"].get("log-dir-failure", 0) >= 1 and report["log_dir_failures_checked"] >= 1, report["faults"]
    assert report["throttles"].get("set", 0) >= 1, report["throttles"]
    assert ok.get("alter-topic-config", 0) >= 1, report["admin"]
    assert report["settle_seconds"] is not None and report["settle_seconds"] <= 90
    assert report["seed"] == 7 and report["partitions_at_end"] >= 200
    printed = capsys.readouterr().out
    assert "verdict: PASS" in printed
    # every controller's effects records carry its loop's times (the replay charts them)
    effects = [r["body"] for node in sorted((out / "nodes").glob("node-*")) if node.is_dir()
               for r in read_journal(node) if r["type"] == "effects"]
    assert len(effects) >= 50
    assert all(type(b.get(k)) is int and b[k] >= 0 for b in effects for k in ("queue_us", "step_us", "process_us"))
    # ... and the soak's summary reports them from the replay
    live = report["replay_stats"]["process_ms_per_event"]
    assert live["count"] >= 50 and 0 < live["median"] <= live["p99"] <= live["max"]
    assert "live processing time per event: median" in " ".join(printed.split())


def test_a_seed_gives_the_same_fault_decisions(tmp_path):
    """The schedule (kinds, picks, holds, pauses) is a function of the seed alone."""
    def decisions(seed: int) -> list:
        fleet = Fleet(ChaosConfig(duration=1, seed=seed), tmp_path)
        faults = Faults(fleet, None, stream(seed, "faults"), Claims(2), lambda *a, **k: None, interval=4.0)
        return [faults.draw() for _ in range(50)]

    assert decisions(11) == decisions(11)
    assert decisions(11) != decisions(12)
    assert len({d.kind for d in decisions(11)}) >= 6  # the draws cover the kinds


def test_bad_flags_are_one_line_errors(tmp_path, capsys):
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "chaos.json").write_text("{}")
    for argv, expected in [
        (["--duration", "0"], "--duration must be above 0"),
        (["--duration", "nan"], "--duration must be above 0"),
        (["--duration", "5", "--nodes", "3", "--max-impaired", "3"], "--max-impaired must be 0-2"),
        (["--duration", "5", "--session-timeout-ms", "10"], "--session-timeout-ms must be 1000-60000"),
        (["--duration", "5", "--out", str(tmp_path / "used")], "is not empty"),
        (["--duration", "5", "--replay", "hadoop"], "invalid choice"),
        (["--duration", "5", "--zookeeper", "host:port:x"], "invalid ZooKeeper connect string"),
    ]:
        assert main(["chaos", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and expected in err, (argv, err)
