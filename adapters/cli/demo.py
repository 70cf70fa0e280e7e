"""`kctl demo`: the tour, on the embedded default. Real processes, nothing left running.

An embedded ZooKeeper and four `kctl node` processes; two topics; then a broker failure, its
return, a reassignment, a preferred election and a controller failover, with the cluster shown
live (controller, brokers, leaders, offline count); once, the cluster as a stock Kafka client
(confluent-kafka) sees it through a broker's Kafka listener; then the Spark replay's audit verdict.
"""
from __future__ import annotations

import asyncio
import contextlib
import io
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table

from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.sim.cluster import LocalCluster, controller, live_broker_ids, partition_states
from adapters.sim import stock_client as stock
from adapters.zookeeper.session import NoNode, ZkSession
from adapters.zookeeper.server import EmbeddedZooKeeper
from controller_core.values import TopicPartition

BROKERS = (1, 2, 3, 4)
SETTINGS = {"zookeeper.session.timeout.ms": "2000", "replica.catch.up.delay.ms": "200",
            "replica.lag.time.max.ms": "2000", "auto.leader.rebalance.enable": "false",
            "simulated.partition.bytes": "3000000"}  # what a moving replica copies (3 s at the demo's throttle)


def add_demo_command(sub, kctl_main: Callable[[list[str]], int]) -> None:
    """Register `kctl demo`; the tour drives the same `kctl` command line (`kctl_main`) a user types."""
    p = sub.add_parser("demo", help="the tour: a live cluster through failures, a reassignment and a failover")
    p.add_argument("--keep", action="store_true", help="keep the journals, logs and replay report")
    p.set_defaults(func=lambda args: run_demo(args.keep, kctl_main))


def _capturing(kctl_main: Callable[[list[str]], int]) -> Callable[..., tuple[int, str]]:
    """`kctl ARGS...` run in this process, returning its exit code and what it printed."""

    def kctl(*args: str) -> tuple[int, str]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = kctl_main(list(args))
        return code, out.getvalue().strip()

    return kctl


async def _view(connect: str) -> dict:
    zk = await ZkSession.connect(connect)
    try:
        holder, epoch = await controller(zk)
        return {"controller": holder, "epoch": epoch, "brokers": await live_broker_ids(zk),
                "partitions": await partition_states(zk), "replicas": await _replicas(zk)}
    finally:
        await zk.close()


async def _replicas(zk: ZkSession) -> dict:
    """{(topic, partition): assigned replicas}."""

    out = {}
    try:
        topics = await zk.get_children(zkpaths.TOPICS)
    except NoNode:
        return out
    for topic in topics:
        data, _ = await zk.get(zkpaths.topic(topic))
        for p, assignment in zkdata.decode_topic_assignment(data, topic=topic).items():
            out[TopicPartition(topic, p)] = assignment.replicas
    return out


def _all_in_sync(view: dict) -> bool:
    """Every live broker is back in the ISR of every partition it is a replica of."""
    live = set(view["brokers"])
    return bool(view["partitions"]) and all(
        set(view["replicas"].get(tp, ())) & live <= set(li.isr) for tp, li in view["partitions"].items())


def _election_summary(out: str) -> str:
    """One line for kctl leader-election's output, which names every partition."""
    moved = already = failed = 0
    for line in out.splitlines():
        if line.startswith("Successfully completed"):
            moved += len(line.split(" for partitions ", 1)[1].split(", "))
        elif line.startswith("Valid replica already elected"):
            already += len(line.split(" for partitions ", 1)[1].split(", "))
        elif line.startswith("Error completing"):
            failed += 1
    return (f"{moved} leader(s) moved back to the preferred replica, {already} already there"
            + (f", {failed} failed" if failed else ""))


def _render(view: dict, step: str, log: list[str]) -> Group:
    live = set(view["brokers"])
    header = (f"controller: broker {view['controller']} (epoch {view['epoch']})    "
              f"live brokers: {', '.join(map(str, view['brokers'])) or 'none'}")
    table = Table(expand=False)
    for col in ("partition", "leader", "leader epoch", "isr"):
        table.add_column(col)
    offline = 0
    for tp, li in sorted(view["partitions"].items()):
        ok = li.leader in live
        offline += not ok
        table.add_row(str(tp), f"[green]{li.leader}[/]" if ok else "[red]none[/]", str(li.leader_epoch),
                      ",".join(map(str, li.isr)))
    footer = f"offline partitions: [{'red' if offline else 'green'}]{offline}[/]"
    return Group(Panel(f"[bold]{step}[/]\n{header}\n{footer}"), table, "\n".join(log[-8:]))


def run_demo(keep: bool, kctl_main: Callable[[list[str]], int]) -> int:
    kctl = _capturing(kctl_main)
    console = Console()
    base = Path(tempfile.mkdtemp(prefix="kctl-demo-"))
    started = time.monotonic()
    zk = EmbeddedZooKeeper(base / "zookeeper")
    console.print(f"[bold]kctl demo[/]: files in {base}" if keep else
                  "[bold]kctl demo[/]: files in a temporary directory, removed at the end (--keep keeps them)")
    zk.start()
    connect = f"{zk.connect_string}/demo"
    log: list[str] = []
    cluster = LocalCluster(connect, base / "journals", settings=SETTINGS)
    try:
        with Live(console=console, refresh_per_second=4) as live:
            def show(step: str, note: str | None = None) -> dict:
                if note:
                    log.append(f"[dim]{time.monotonic() - started:5.1f}s[/] {note}")
                view = asyncio.run(_view(connect))
                live.update(_render(view, step, log))
                return view

            def wait(step: str, predicate, timeout: float = 30.0) -> dict:
                deadline = time.monotonic() + timeout
                while True:
                    view = show(step)
                    if predicate(view) or time.monotonic() > deadline:
                        return view
                    time.sleep(0.3)

            for b in BROKERS:
                cluster.start_node(b)
            wait("starting 4 brokers", lambda v: len(v["brokers"]) == 4 and v["controller"] is not None)
            show("creating topics", "kctl topics --create orders (6 partitions, RF 3) and events (3, RF 2)")
            kctl("topics", "--zookeeper", connect, "--create", "--topic", "orders", "--partitions", "6",
                  "--replication-factor", "3")
            kctl("topics", "--zookeeper", connect, "--create", "--topic", "events", "--partitions", "3",
                  "--replication-factor", "2")
            view = wait("creating topics", lambda v: len(v["partitions"]) == 9)
            time.sleep(1.0)  # the brokers' caches get the new leaders from the controller's UpdateMetadata
            show("a stock Kafka client", asyncio.run(stock.summary(connect)))

            ctrl = view["controller"]
            victim = next(b for b in BROKERS if b != ctrl)
            cluster.kill(victim)
            show("broker failure", f"SIGKILL broker {victim}: its leaders move to in-sync replicas")
            wait("broker failure", lambda v: victim not in v["brokers"]
                 and all(li.leader != victim for li in v["partitions"].values()))
            cluster.start_node(victim)
            show("broker return", f"broker {victim} restarts and rejoins the ISRs")
            wait("broker return", lambda v: victim in v["brokers"] and
                 _all_in_sync(v), 30)

            plan = base / "reassign.json"
            view = show("reassignment")
            target = [b for b in BROKERS if b != victim][:3]
            plan.write_text(json.dumps({"version": 1, "partitions": [
                {"topic": "events", "partition": 0, "replicas": target}]}))
            code, out = kctl("reassign-partitions", "--zookeeper", connect, "--reassignment-json-file", str(plan),
                              "--execute", "--throttle", "1000000")
            show("reassignment", f"kctl reassign-partitions --execute --throttle 1000000: events-0 -> {target} "
                                 "(the new replica copies 3 MB at 1 MB/s)")
            verified: list[str] = []
            wait("reassignment", lambda v: _verified(kctl, connect, plan, verified))
            # the --verify that saw it complete removed the throttle
            show("reassignment", "kctl reassign-partitions --verify: " + " ".join(verified[-1].splitlines()[-1:]))

            code, out = kctl("leader-election", "--zookeeper", connect, "--election-type", "PREFERRED",
                              "--all-topic-partitions")
            show("preferred election", "kctl leader-election PREFERRED: " + _election_summary(out))
            time.sleep(1.0)

            view = show("controller failover")
            old, old_epoch = view["controller"], view["epoch"]
            cluster.kill(old)
            show("controller failover", f"SIGKILL the controller (broker {old}, epoch {old_epoch})")
            view = wait("controller failover", lambda v: v["controller"] not in (None, old) and v["epoch"] > old_epoch)
            cluster.start_node(old)
            show("controller failover", f"broker {old} restarts and rejoins the ISRs")
            view = wait("controller failover", lambda v: len(v["brokers"]) == 4 and _all_in_sync(v), 60)
            show("done", f"broker {view['controller']} is the controller with epoch {view['epoch']}; "
                         f"broker {old} rejoined as a broker" + ("" if _all_in_sync(view) else
                                                                  " (some ISRs have not recovered yet)"))
        cluster.stop_all()
        _replay(kctl, console, base, keep)
        console.print(f"[bold]done in {time.monotonic() - started:.0f} s[/]; journals and logs in {base}"
                      if keep else f"[bold]done in {time.monotonic() - started:.0f} s[/] "
                                   "(kctl demo --keep keeps the journals, logs and report)")
        return 0
    finally:
        cluster.stop_all()
        zk.stop()
        if not keep:
            shutil.rmtree(base, ignore_errors=True)


def _verified(kctl, connect: str, plan: Path, seen: list[str] | None = None) -> bool:
    code, out = kctl("reassign-partitions", "--zookeeper", connect, "--reassignment-json-file", str(plan), "--verify")
    if seen is not None:
        seen.append(out)
    return "completed successfully" in out


def _replay(kctl, console: Console, base: Path, keep: bool) -> None:
    """The offline audit of every journal the cluster wrote (if the replay job is installed)."""
    try:
        from replay.local import run_local  # noqa: F401
    except ImportError:
        console.print("[yellow]replay: not available in this build[/]")
        return
    console.print()
    console.print("[bold]replay[/]: auditing every controller's journal on a local Spark ...")
    code, out = kctl("replay", "--journal", str(base / "journals"), "--out", str(base / "replay"))
    console.print("\n".join(out.splitlines()[-40:]), markup=False)
    verdict = "[green]PASS[/]" if code == 0 else "[red]VIOLATIONS[/]"
    # without --keep the report is deleted on exit: name it only when it stays
    console.print(f"audit verdict: {verdict}" + (f" (report: {base / 'replay' / 'report.html'})" if keep else ""))
