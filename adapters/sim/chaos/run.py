"""One chaos run, start to verdict: set up, break things, heal, settle, check, report.

    report = await run_chaos(ChaosConfig(duration=60, seed=7, partitions=200, out=Path("out")))
    report["passed"]   # chaos.json holds the same dict

Phases (each shown on the live line):

1. setup: ZooKeeper (embedded unless given), one proxy per node, the node processes; the
   `base-*` topics (about `partitions` in all, replication factor 3) created with the admin
   tools, and every partition led before the chaos starts;
2. chaos: the fault scheduler (faults.py) and the admin workload (workload.py) run side by side
   for `duration` seconds;
3. heal: running faults are cancelled, then every proxy is opened, ZooKeeper is up, every node
   is running and resumed (`Fleet.heal_all`);
4. settle: checks 1-4, 7 and 8 (checks.py) plus "every node registered, a controller elected"
   are repeated until they all pass or `settle_timeout` runs out; the time this took is "time to
   settle". Check 7 first does the operator's last verify of the throttled reassignments;
5. audit: the nodes are stopped (SIGKILL: their journals hold every fsynced record) and the
   journals replayed (checks 5, 6 and 9).

Exit status of `kctl chaos`: 0 when every check passes, 1 otherwise.
"""
from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from adapters import admin
from adapters.sim.cluster import controller, live_broker_ids, wait_for
from adapters.zookeeper.session import ZkError, ZkSession
from adapters.sim.chaos import checks as K
from adapters.sim.chaos import report as R
from adapters.sim.chaos.config import ChaosConfig, stream
from adapters.sim.chaos.faults import Claims, Faults
from adapters.sim.chaos.fleet import Fleet
from adapters.sim.chaos.workload import Workload, throttle_keys

log = logging.getLogger("kctl.chaos")

SETUP_TIMEOUT = 180.0
STATUS_EVERY = 15.0  # seconds between status lines when the console is not a terminal


class SetupFailed(Exception):
    """The cluster could not be brought up before the chaos (not a verdict on the cluster)."""


class Run:
    def __init__(self, config: ChaosConfig, console: Console, base: Path):
        self.config = config
        self.console = console
        self.base = base
        self.fleet = Fleet(config, base)
        self.zk: ZkSession | None = None
        self.phase = "setup"
        self.t0 = time.monotonic()
        self.chaos_started: float | None = None
        self.events: list[dict] = []
        self.claims = Claims(config.max_impaired)
        self.faults: Faults | None = None
        self.work: Workload | None = None
        self.controller: tuple[int | None, int] = (None, 0)
        self.timings: dict[str, float] = {}
        self.replay_stats: dict = {}

    # -- bookkeeping ---------------------------------------------------------------------------

    def record(self, what: str, kind: str, *, node: int | None = None, outcome: str | None = None,
               detail: str = "") -> None:
        start = self.chaos_started or self.t0
        entry = {"t": round(time.monotonic() - start, 2), "what": what, "kind": kind}
        if node is not None:
            entry["node"] = node
        if outcome is not None:
            entry["outcome"] = outcome
        if detail:
            entry["detail"] = detail
        self.events.append(entry)
        log.info("%s %s%s%s: %s", what, kind, f" node {node}" if node is not None else "",
                 f" [{outcome}]" if outcome else "", detail)

    def status(self) -> dict:
        elapsed = time.monotonic() - self.chaos_started if self.chaos_started else 0.0
        return {"phase": self.phase, "elapsed": min(elapsed, self.config.duration), "duration": self.config.duration,
                "faults": sum(self.faults.injected.values()) if self.faults else 0,
                "admin": sum(sum(c.values()) for c in self.work.outcomes.values()) if self.work else 0,
                "controller": self.controller[0], "epoch": self.controller[1],
                "impaired": sorted(self.claims.nodes), "zookeeper_down": self.fleet.zookeeper_down}

    async def _watch_controller(self) -> None:
        while True:
            try:
                self.controller = await asyncio.wait_for(controller(self.zk), 2)
            except (ZkError, asyncio.TimeoutError):
                pass
            await asyncio.sleep(1.0)

    async def _show(self) -> None:
        """The live line: a progress bar on a terminal, a status line every STATUS_EVERY s otherwise."""
        if not self.console.is_terminal:
            while True:
                await asyncio.sleep(STATUS_EVERY)
                self.console.print(R.status_line(self.status()), highlight=False, soft_wrap=True)
                self.console.file.flush()  # a pipe (make soak | tee) would hold the lines back
        with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=self.console,
                      transient=True) as progress:
            task = progress.add_task(R.status_line(self.status()), total=self.config.duration)
            while True:
                s = self.status()
                progress.update(task, completed=s["elapsed"], description=R.status_line(s))
                await asyncio.sleep(0.5)

    # -- phases --------------------------------------------------------------------------------

    async def execute(self) -> dict:
        helpers: list[asyncio.Task] = []
        try:
            started = time.monotonic()
            await self.fleet.start()
            self.zk = await self.fleet.admin_session()
            helpers = [asyncio.create_task(self._watch_controller()), asyncio.create_task(self._show())]
            await self._setup()
            self.timings["setup"] = time.monotonic() - started
            await self._chaos()
            settle, final = await self._heal_and_settle()
            audit = await self._audit()
        finally:
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            if self.zk is not None:
                await self.zk.close()
            await self.fleet.close()
        return self._report(settle, final, audit)

    async def _setup(self) -> None:
        cfg = self.config
        ids = set(self.fleet.ids)

        async def registered():
            return ids <= set(await live_broker_ids(self.zk))

        async def elected():
            holder, _ = await controller(self.zk)
            return holder is not None

        try:
            await wait_for(registered, timeout=SETUP_TIMEOUT, interval=0.2, what=f"{cfg.nodes} brokers registered")
            await wait_for(elected, timeout=SETUP_TIMEOUT, interval=0.2, what="a controller")
            rng = stream(cfg.seed, "setup")
            for name, partitions in cfg.base_topics():
                await admin.create_topic(self.zk, name, partitions=partitions, replication_factor=cfg.rf,
                                         seed=rng.randrange(2**31))

            async def led():
                view = await K.read_cluster(self.zk)
                return sum(len(a) for a in view.assignments.values()) == cfg.partitions and K.check_leaders(view).ok

            await wait_for(led, timeout=SETUP_TIMEOUT, interval=0.5, what=f"{cfg.partitions} partitions led")
        except TimeoutError as exc:
            raise SetupFailed(f"the cluster did not come up: {exc} (node logs in {self.fleet.journals})") from None

    async def _chaos(self) -> None:
        cfg = self.config
        self.phase = "chaos"
        self.chaos_started = time.monotonic()
        self.faults = Faults(self.fleet, self.zk, stream(cfg.seed, "faults"), self.claims, self.record,
                             cfg.fault_interval)
        self.work = Workload(self.fleet, self.zk, stream(cfg.seed, "admin"), self.claims, self.record,
                             cfg.admin_interval)
        until = self.chaos_started + cfg.duration
        await asyncio.gather(self.faults.run(until), self.work.run(until))
        self.timings["chaos"] = time.monotonic() - self.chaos_started

    async def _heal_and_settle(self) -> tuple[float | None, list[K.Check]]:
        cfg = self.config
        self.phase = "healing"
        started = time.monotonic()
        await self.faults.stop()
        await self.work.stop()
        await self.fleet.heal_all()
        self.record("heal", "all", detail="proxies open, ZooKeeper up, every node running and resumed")
        healed = time.monotonic()
        self.timings["heal"] = healed - started
        self.phase = "settling"
        deadline = healed + cfg.settle_timeout
        while True:
            try:
                found = await asyncio.wait_for(self._cluster_checks(), 60)
            except (ZkError, asyncio.TimeoutError) as exc:
                found = [K.Check("zookeeper", False, f"cannot read the cluster: {exc!r}", 1)]
            if all(c.ok for c in found):
                settle = time.monotonic() - healed
                self.record("settled", "all", detail=f"{settle:.1f} s after the heal")
                self.timings["settle"] = settle
                return settle, found
            if time.monotonic() > deadline:
                self.record("not-settled", "all", detail="; ".join(c.detail for c in found if not c.ok))
                self.timings["settle"] = time.monotonic() - healed
                return None, found
            await asyncio.sleep(1.0)

    async def _cluster_checks(self) -> list[K.Check]:
        view = await K.read_cluster(self.zk)
        self.final_view = view
        missing = sorted(set(self.fleet.ids) - set(view.brokers))
        holder, _ = await controller(self.zk)
        problems = [f"node {b} is not registered" for b in missing]
        if holder is None:
            problems.append("no controller is elected")
        cluster = K.check_from("cluster", problems, f"all {len(self.fleet.ids)} nodes registered, controller {holder}",
                           "{n} problem(s): nodes missing or no controller")
        return [cluster, K.check_leaders(view), K.check_reassignments(view, self.work.reassignments),
                K.check_deletions(view, self.work.deletions), await K.check_metadata(view),
                await K.check_kafka_client(view, holder), await self._check_throttles(cluster.ok),
                await K.check_log_dirs(self.zk, self.fleet)]

    async def _check_throttles(self, every_node_up: bool) -> K.Check:
        """The operator's last verify (Workload.finish), once every node is registered, then
        what is left of the throttles."""
        if not every_node_up:
            return K.check_throttles("waiting for every node to register", [], [])
        try:
            before = await self.work.finish()
        except admin.AdminError as exc:
            return K.check_throttles(str(exc), [], [])
        except admin.ToolFailure as exc:
            return K.check_throttles(f"the last verify failed: {exc}", [], [])
        return K.check_throttles(None, await throttle_keys(self.zk), before)

    async def _audit(self) -> list[K.Check]:
        self.phase = "replay"
        started = time.monotonic()
        await self.fleet.stop_nodes()
        out = self.base
        mode = self.config.replay
        if mode == "local":
            replayed, self.replay_stats = await asyncio.to_thread(K.replay_local, self.fleet.journals, out)
        elif mode == "spark":
            replayed, self.replay_stats = await asyncio.to_thread(K.replay_spark, self.fleet.journals, out)
        else:
            replayed = K.Check("replay", True, "not run (--replay none)")
        self.timings["replay"] = time.monotonic() - started
        return [replayed, K.check_processes(self.fleet.unexpected_exits),
                K.check_log_dir_failures(self.faults.log_dir_problems, self.faults.log_dir_checked)]

    # -- the report ------------------------------------------------------------------------------

    def _report(self, settle: float | None, final: list[K.Check], audit: list[K.Check]) -> dict:
        cfg = self.config
        found = final + audit
        failed = [c.name for c in found if not c.ok]
        view = getattr(self, "final_view", None)
        return {
            "seed": cfg.seed,
            "duration_s": cfg.duration,
            "nodes": cfg.nodes,
            "partitions": cfg.partitions,
            "partitions_at_end": sum(len(a) for a in view.assignments.values()) if view else None,
            "topics_at_end": len(view.assignments) if view else None,
            "session_timeout_ms": cfg.session_timeout_ms,
            "zookeeper": ("embedded" if cfg.zookeeper_servers == 1 else f"embedded ensemble of {cfg.zookeeper_servers}")
            if self.fleet.embedded else cfg.zookeeper,
            "replay_mode": cfg.replay,
            "faults": dict(sorted(self.faults.injected.items())),
            "faults_skipped": dict(sorted(self.faults.skipped.items())),
            "admin": {k: dict(v) for k, v in sorted(self.work.outcomes.items())},
            "throttles": dict(sorted(self.work.throttles.items())),
            "log_dir_failures_checked": self.faults.log_dir_checked,
            # per failure whose dir held leaders: seconds until its replicas were all offline
            "log_dir_failures_handled_s": [round(x, 2) for x in self.faults.log_dir_offline_s],
            "deletions_requested": sorted(self.work.deletions),
            "checks": [c.to_json() for c in found],
            "violations": sum(c.count for c in found if not c.ok),
            "settle_seconds": None if settle is None else round(settle, 2),
            "settle_timeout_s": cfg.settle_timeout,
            "passed": not failed,
            "failed_checks": failed,
            "unexpected_exits": self.fleet.unexpected_exits,
            "controllers": R.log_stats(sorted(self.fleet.journals.glob("node-*.log"))),
            "replay_stats": {k: v for k, v in self.replay_stats.items()
                             if k in ("events", "journals", "segments", "units", "step_seconds", "wall_seconds",
                                      "offline_ms_per_partition", "recovery_ms_per_failure",
                                      "process_ms_per_event", "queue_ms_per_event")},
            "proxies": {b: dict(p.counts) for b, p in self.fleet.proxies.items()},
            "phase_seconds": {k: round(v, 2) for k, v in self.timings.items()},
            "out": str(self.base),
            "timeline": self.events,
        }


async def run_chaos(config: ChaosConfig, console: Console | None = None) -> dict:
    """Run the soak; returns the report (also written to `<out>/chaos.json`) and prints the
    tables. Without `config.out` the files go to a temporary directory, removed when the run
    passes and kept (and named) when it fails."""
    console = console or Console()
    temporary = config.out is None
    base = Path(tempfile.mkdtemp(prefix="kctl-chaos-")) if temporary else Path(config.out)
    base.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(base / "chaos.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    previous_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    console.print(f"[bold]kctl chaos[/]: seed {config.seed}, {config.duration:g} s, {config.nodes} nodes, "
                  f"{config.partitions} partitions; files in {base}", highlight=False)
    try:
        report = await Run(config, console, base).execute()
    finally:
        root.removeHandler(handler)
        root.setLevel(previous_level)
        handler.close()
    R.write_json(base, report)
    R.print_report(console, report)
    if temporary and report["passed"]:
        shutil.rmtree(base, ignore_errors=True)
    elif temporary:
        console.print(f"files kept in {base}")
    return report
