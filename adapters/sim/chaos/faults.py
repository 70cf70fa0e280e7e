"""The fault scheduler: which fault, when, on which node, for how long.

Every `fault_interval` seconds on average a fault kind is drawn (weights below) and started as an
episode of its own, so faults overlap; an episode claims the node it breaks, and at most
`max_impaired` nodes are claimed at once (the admin workload's controlled shutdowns claim from
the same pool). Every draw uses the same number of random numbers whatever the cluster looks
like, so a seed gives the same sequence of decisions; which broker "the controller" is at that
moment is up to the cluster.

| kind | what happens |
|---|---|
| kill-broker / kill-controller | SIGKILL (the controller is found via `/controller`), down 0.5 s to 2 session timeouts, restarted |
| pause-controller / pause-broker | SIGSTOP for 1.3 to 2 session timeouts (a long GC pause: the session expires, a zombie wakes up), then SIGCONT |
| expire-session | ZooKeeper expires the node's session (a second handle on its session id and password) |
| zk-restart | the ZooKeeper server is stopped and started on the same data directory (embedded server only) |
| proxy-delay | 50 to 650 ms added each way on the node's link to ZooKeeper, for 2 to 8 s |
| proxy-cut | the node's link is reset and refused for 0.5 s to 2 session timeouts (half the time the controller's) |
| proxy-blackhole | the node's link forwards nothing for 1 to 3 session timeouts, packets silently held (half the time the controller's) |
| member-kill | (ensemble mode) SIGKILL one ZooKeeper member (half the time the one the controller's session is on, else any; the leader among them), down 0.5 s to 2 session timeouts, restarted |
| member-pause | (ensemble mode) SIGSTOP one member for 1 to 3 session timeouts (its clients hear nothing; a paused leader is replaced), then SIGCONT |
| member-restart | (ensemble mode) SIGTERM one member and start it again on the same data dir |
| log-dir-failure | one of the node's two log dirs fails (deleted, or replaced by a file): the broker reports it through `/log_dir_event_notification` and stays registered; once the failed replicas are offline (checked, see below), 2 to 8 s later the disk is replaced: controlled shutdown, a fresh empty dir, restart |

A log-dir failure is also a check: within `LOG_DIR_DEADLINE` seconds, no partition whose replica
on that node lived in the failed dir may be led by that node, nor keep it in an ISR it shares
with others (Kafka's `onReplicasBecomeOffline`: another ISR member is elected, the failed
replica leaves the ISR unless it is the last member, and then the partition stays leaderless).
Partitions of topics queued for deletion are left out: Kafka leaves them to the deletion, which
waits for the broker's restart (seed 16, 2026-12-06: a topic deleted 2.5 s before the failure
kept its three leaders there until the disk was replaced).
Episodes where that did not happen are listed in `log_dir_problems` (the `log-dir-failures`
check of checks.py).

In ensemble mode `zk-restart` is not drawn, and one member at a time is faulted, so a quorum
always remains (quorum loss is tests/integration/test_zookeeper_ensemble.py's business).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from typing import Callable, NamedTuple

from adapters.sim.cluster import controller
from adapters.zookeeper.session import ZkError, ZkSession
from adapters.sim.chaos.fleet import LOG_DIR_FAILURES, LOG_DIRS, Fleet
from adapters.znodes import codec as zkdata, paths as zkpaths

log = logging.getLogger("kctl.chaos")

WEIGHTS = {
    "kill-broker": 3,
    "kill-controller": 2,
    "pause-controller": 2,
    "pause-broker": 1,
    "expire-session": 2,
    "zk-restart": 1,
    "proxy-delay": 2,
    "proxy-cut": 2,
    "proxy-blackhole": 1,
    "log-dir-failure": 2,
}
ENSEMBLE_WEIGHTS = {"member-kill": 2, "member-pause": 1, "member-restart": 1}
SETTLE_AFTER = 2.0  # seconds a node stays claimed after its fault is undone (it re-registers)
LOG_DIR_DEADLINE = 45.0  # seconds for the cluster to stop leading partitions from a failed log dir


class Draw(NamedTuple):
    kind: str
    pick: float  # which eligible node
    hold: float  # how long, as a fraction of the kind's range
    amount: float  # how much (the delay)
    pause: float  # seconds until the next fault


class Claims:
    """The nodes under a fault or an admin operation right now, shared by both."""

    def __init__(self, limit: int):
        self.limit = limit
        self.nodes: set[int] = set()

    def free(self) -> bool:
        return len(self.nodes) < self.limit


class Faults:
    def __init__(self, fleet: Fleet, zk: ZkSession, rng, claims: Claims, record: Callable[..., None],
                 interval: float, kinds: dict[str, int] | None = None):
        self.fleet = fleet
        self.zk = zk
        self.rng = rng
        self.claims = claims
        self.record = record
        self.interval = interval
        weights = dict(kinds or WEIGHTS)
        if not fleet.embedded:
            weights.pop("zk-restart", None)  # not ours to restart
        if fleet.ensemble is not None:
            weights.pop("zk-restart", None)  # the members are restarted one by one instead
            if kinds is None:
                weights.update(ENSEMBLE_WEIGHTS)
        self._member_busy = False
        self.kinds = sorted(weights)
        self.weights = [weights[k] for k in self.kinds]
        self.session_s = fleet.config.session_timeout_ms / 1000
        self.injected: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.active: dict[asyncio.Task, str] = {}
        self._zk_restarting = False
        self.log_dir_problems: list[str] = []
        self.log_dir_checked = 0  # failures whose replicas were seen offline in time
        self.log_dir_offline_s: list[float] = []  # per failure that had leaders in the dir: until all were offline

    def draw(self) -> Draw:
        rng = self.rng
        kind = rng.choices(self.kinds, self.weights)[0]
        return Draw(kind, rng.random(), rng.random(), rng.random(), self.interval * rng.uniform(0.5, 1.5))

    async def run(self, until: float) -> None:
        """Start episodes until `until` (time.monotonic())."""
        while True:
            d = self.draw()
            await asyncio.sleep(min(d.pause, max(0.0, until - time.monotonic())))
            if time.monotonic() >= until:
                return
            task = asyncio.create_task(self._episode(d), name=f"fault-{d.kind}")
            self.active[task] = d.kind
            task.add_done_callback(lambda t: self.active.pop(t, None))

    async def stop(self) -> None:
        """Cancel the running episodes (their faults are undone by `Fleet.heal_all`)."""
        tasks = list(self.active)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- episodes --------------------------------------------------------------------------------

    async def _episode(self, d: Draw) -> None:
        try:
            await getattr(self, "_" + d.kind.replace("-", "_"))(d)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a fault that could not be injected is recorded, not fatal
            log.warning("fault %s failed: %r", d.kind, exc)
            self.skipped[f"{d.kind}: {type(exc).__name__}"] += 1
            self.record("fault-failed", d.kind, detail=repr(exc))

    async def _target(self, d: Draw, want_controller: bool | None) -> int | None:
        """The node to break: the controller, a non-controller, or any (None). None: skip."""
        if not self.claims.free():
            self.skipped[f"{d.kind}: {self.claims.limit} nodes already impaired"] += 1
            return None
        eligible = [b for b in self.fleet.ids if b not in self.claims.nodes and self.fleet.running(b)
                    and b not in self.fleet.paused]
        if want_controller is not None:
            try:
                holder, _ = await asyncio.wait_for(controller(self.zk), 5)
            except (ZkError, asyncio.TimeoutError):
                self.skipped[f"{d.kind}: ZooKeeper unreachable"] += 1
                return None
            if want_controller:
                eligible = [b for b in eligible if b == holder]
            else:
                eligible = [b for b in eligible if b != holder]
        if not eligible:
            self.skipped[f"{d.kind}: no eligible node"] += 1
            return None
        b = eligible[int(d.pick * len(eligible))]
        self.claims.nodes.add(b)
        return b

    @contextlib.asynccontextmanager
    async def _claimed(self, b: int):
        """Node b stays claimed while its fault lasts and SETTLE_AFTER seconds more (not when
        the episode is cancelled: the heal takes over then)."""
        try:
            yield
            await asyncio.sleep(SETTLE_AFTER)
        finally:
            self.claims.nodes.discard(b)

    async def _kill(self, d: Draw, want_controller: bool) -> None:
        b = await self._target(d, want_controller)
        if b is None:
            return
        async with self._claimed(b):
            down = 0.5 + d.hold * 2 * self.session_s
            await self.fleet.kill(b)
            self._injected(d.kind, b, f"SIGKILL, restart after {down:.1f} s")
            await asyncio.sleep(down)
            await self.fleet.start_node(b)

    async def _kill_broker(self, d: Draw) -> None:
        await self._kill(d, False)

    async def _kill_controller(self, d: Draw) -> None:
        await self._kill(d, True)

    async def _pause(self, d: Draw, want_controller: bool) -> None:
        b = await self._target(d, want_controller)
        if b is None:
            return
        async with self._claimed(b):
            held = self.session_s * (1.3 + 0.7 * d.hold)
            self.fleet.pause(b)
            self._injected(d.kind, b, f"SIGSTOP for {held:.1f} s (session timeout {self.session_s:g} s)")
            await asyncio.sleep(held)
            self.fleet.resume(b)

    async def _pause_controller(self, d: Draw) -> None:
        await self._pause(d, True)

    async def _pause_broker(self, d: Draw) -> None:
        await self._pause(d, False)

    async def _expire_session(self, d: Draw) -> None:
        if self.fleet.zookeeper_down:
            self.skipped[f"{d.kind}: ZooKeeper is restarting"] += 1
            return
        b = await self._target(d, None)
        if b is None:
            return
        async with self._claimed(b):
            session = await self.fleet.expire(b)
            if session is None:
                self.skipped[f"{d.kind}: no session known"] += 1
                return
            self._injected(d.kind, b, f"session 0x{session:x} expired")

    async def _zk_restart(self, d: Draw) -> None:
        if self._zk_restarting:
            self.skipped[f"{d.kind}: already restarting"] += 1
            return
        self._zk_restarting = True
        try:
            self._injected(d.kind, None, "stop and start on the same data directory")
            down = await self.fleet.restart_zookeeper()
            self.record("zk-restarted", d.kind, detail=f"down {down:.1f} s")
        finally:
            self._zk_restarting = False

    async def _proxy(self, d: Draw, action: Callable[[int], str], hold: float, controller_first: bool = False) -> None:
        """`controller_first`: half the time (by `d.amount`) the controller is the one cut off,
        the partitioned zombie: still talking to its brokers, unable to reach ZooKeeper."""
        on_controller = controller_first and d.amount < 0.5
        b = await self._target(d, True if on_controller else None)
        if b is None:
            return
        async with self._claimed(b):
            what = action(b) + (" (the controller)" if on_controller else "")
            self._injected(d.kind, b, f"{what} for {hold:.1f} s")
            await asyncio.sleep(hold)
            self.fleet.proxies[b].heal()

    async def _proxy_delay(self, d: Draw) -> None:
        delay = 0.05 + 0.6 * d.amount

        def act(b: int) -> str:
            self.fleet.proxies[b].set_delay(delay)
            return f"+{delay * 1000:.0f} ms each way"
        await self._proxy(d, act, 2 + 6 * d.hold)

    async def _proxy_cut(self, d: Draw) -> None:
        def act(b: int) -> str:
            self.fleet.proxies[b].cut()
            return "cut"
        await self._proxy(d, act, 0.5 + 2 * self.session_s * d.hold, controller_first=True)

    async def _proxy_blackhole(self, d: Draw) -> None:
        def act(b: int) -> str:
            self.fleet.proxies[b].blackhole()
            return "black hole"
        await self._proxy(d, act, self.session_s * (1 + 2 * d.hold), controller_first=True)

    async def _log_dir_failure(self, d: Draw) -> None:
        b = await self._target(d, None)
        if b is None:
            return
        async with self._claimed(b):
            choice = min(int(d.amount * 4), 3)
            index, how = choice % LOG_DIRS, LOG_DIR_FAILURES[choice // LOG_DIRS]
            replicas = self.fleet.replicas_in(self.fleet.log_dirs[b][index])
            try:
                leading = len(await asyncio.wait_for(self._still_online(b, replicas, leaders_only=True), 10))
            except (ZkError, asyncio.TimeoutError):
                leading = None
            failed = self.fleet.fail_log_dir(b, index, how)
            started = time.monotonic()
            self._injected(d.kind, b, f"log dir {failed.name} {how} ({len(replicas)} replicas in it, "
                                      f"{'?' if leading is None else leading} of them leaders)")
            led = await self._until_offline(b, replicas, started + LOG_DIR_DEADLINE)
            took = time.monotonic() - started
            if led is None:
                self.record("log-dir-unchecked", d.kind, node=b, detail="ZooKeeper could not be read until the deadline")
            elif led:
                problem = (f"node {b}: {len(led)} replica(s) in its failed log dir {failed.name} still leader or "
                           f"in a shared ISR {LOG_DIR_DEADLINE:.0f} s after the failure: {', '.join(led[:5])}")
                self.log_dir_problems.append(problem)
                self.record("log-dir-still-led", d.kind, node=b, detail=problem)
            else:
                self.log_dir_checked += 1
                if leading:
                    self.log_dir_offline_s.append(took)
                self.record("log-dir-handled", d.kind, node=b,
                            detail=f"the replicas in {failed.name} neither lead nor share an ISR {took:.1f} s after "
                                   "the failure")
            await asyncio.sleep(2 + 6 * d.hold)
            code = await self.fleet.replace_disk(b)
            self.record("disk-replaced", d.kind, node=b,
                        detail=f"controlled shutdown exit code {code}, {failed.name} replaced by an empty dir, "
                               "restarted")

    async def _until_offline(self, b: int, replicas: list[tuple[str, int]], deadline: float) -> list[str] | None:
        """Poll `_still_online` until it finds nothing, or `deadline`; returns what the last
        successful read found (None: ZooKeeper could not be read at all)."""
        online: list[str] | None = None
        while True:
            try:
                online = await asyncio.wait_for(self._still_online(b, replicas), 10)
            except (ZkError, asyncio.TimeoutError):
                pass  # ZooKeeper restarting: the last read stands
            if online == [] or time.monotonic() >= deadline:
                return online
            await asyncio.sleep(0.5)

    async def _still_online(self, b: int, replicas: list[tuple[str, int]], leaders_only: bool = False) -> list[str]:
        """Those of node b's `replicas` that b leads, or (unless `leaders_only`) whose ISR holds b
        and another broker. Partitions deleted or moved off b since do not count, nor those of
        topics queued for deletion: Kafka's controller elects none of them (onReplicasBecomeOffline
        leaves them to the deletion, which fails for a replica on a failed dir and resumes once
        its broker restarts; their brokers were told leader -2 when the deletion began)."""
        topics = sorted({t for t, _ in replicas})
        found = await self.zk.get_many([zkpaths.topic(t) for t in topics])
        queued = await self.zk.get_many([zkpaths.delete_topic(t) for t in topics])
        hosted = []
        for t, p in replicas:
            value = found.get(zkpaths.topic(t))
            if value is None or queued.get(zkpaths.delete_topic(t)) is not None:
                continue
            ra = zkdata.decode_topic_assignment(value[0], topic=t).get(p)
            if ra is not None and b in ra.replicas:
                hosted.append((t, p))
        states = await self.zk.get_many([zkpaths.partition_state(t, p) for t, p in hosted])
        out = []
        for t, p in hosted:
            value = states.get(zkpaths.partition_state(t, p))
            if value is None:
                continue
            li = zkdata.decode_partition_state(value[0], value[1].version)
            if li.leader == b:
                out.append(f"{t}-{p} (leader)")
            elif not leaders_only and b in li.isr and len(li.isr) > 1:
                out.append(f"{t}-{p} (isr {','.join(map(str, li.isr))})")
        return out

    # -- ensemble members ----------------------------------------------------------------------

    async def _member(self, d: Draw):
        """The member to break (None: skip): by `d.amount`, half the time the one holding the
        controller's session, otherwise one picked by `d.pick`."""
        ensemble = self.fleet.ensemble
        if self._member_busy:
            self.skipped[f"{d.kind}: a member is already down"] += 1
            return None
        members = ensemble.members
        member = members[min(int(d.pick * len(members)), len(members) - 1)]
        if d.amount < 0.5:
            try:
                stat = await self.zk.exists("/controller")
            except ZkError:
                stat = None
            if stat is not None:
                holding = await asyncio.to_thread(ensemble.member_with_session, stat.ephemeral_owner)
                member = holding or member
        return member

    @contextlib.asynccontextmanager
    async def _member_claimed(self):
        self._member_busy = True
        try:
            yield
        finally:
            self._member_busy = False

    async def _member_kill(self, d: Draw) -> None:
        member = await self._member(d)
        if member is None:
            return
        async with self._member_claimed():
            hold = 0.5 + 2 * self.session_s * d.hold
            mode = await asyncio.to_thread(member.mode)
            await self.fleet.kill_member(member)
            self._injected(d.kind, None, f"ZooKeeper member {member.server_id} ({mode}) SIGKILLed for {hold:.1f} s")
            await asyncio.sleep(hold)
            back = await self.fleet.start_member(member)
            self.record("member-back", d.kind, detail=f"member {member.server_id} serving {back:.1f} s after its start")

    async def _member_pause(self, d: Draw) -> None:
        member = await self._member(d)
        if member is None:
            return
        async with self._member_claimed():
            hold = self.session_s * (1 + 2 * d.hold)
            mode = await asyncio.to_thread(member.mode)
            await self.fleet.pause_member(member)
            self._injected(d.kind, None, f"ZooKeeper member {member.server_id} ({mode}) SIGSTOPped for {hold:.1f} s")
            try:
                await asyncio.sleep(hold)
            finally:
                await self.fleet.resume_member(member)

    async def _member_restart(self, d: Draw) -> None:
        member = await self._member(d)
        if member is None:
            return
        async with self._member_claimed():
            mode = await asyncio.to_thread(member.mode)
            self._injected(d.kind, None, f"ZooKeeper member {member.server_id} ({mode}) restarted")
            took = await self.fleet.restart_member(member)
            self.record("member-back", d.kind, detail=f"member {member.server_id} serving {took:.1f} s after its stop")

    def _injected(self, kind: str, node: int | None, detail: str) -> None:
        self.injected[kind] += 1
        self.record("fault", kind, node=node, detail=detail)
