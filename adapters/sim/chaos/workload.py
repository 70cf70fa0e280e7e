"""The admin workload: what an operator does to the cluster while the faults happen.

Every operation goes through `adapters/admin/`, the code behind `kctl topics`,
`kctl reassign-partitions` and `kctl leader-election`, on the harness's own ZooKeeper session;
a controlled shutdown is a SIGTERM to the node process (what an init system sends), then a
restart. Each operation ends in one of three outcomes:

- `ok`: the tool did it (written to ZooKeeper, or answered by the controller);
- `refused`: the tool said no before writing anything (`AdminError`: a reassignment is already
  running, too few live brokers for the replication factor, ...), as it would to an operator;
- `failed`: it could not be carried out (ZooKeeper or the controller unreachable, a timeout):
  expected now and then under faults, and counted.

| kind | what |
|---|---|
| create-topic | a new topic `chaos-<n>`, 2 to 11 partitions, replication factor 2 to 3, Kafka's placement (seeded) |
| add-partitions | 1 to 4 more partitions for an existing topic |
| delete-topic | mark a `chaos-<n>` topic for deletion (the `base-*` topics stay) |
| reassign | move 1 to 4 partitions of a topic to other live brokers |
| reassign-throttled | the same with `--throttle` (2.5 to 10 MB/s: a simulated replica copies `simulated.partition.bytes`); while that reassignment runs, rerunning it changes the rate |
| verify-reassignment | `--verify` of the last reassignment; once every partition of a throttled one completed, the throttle is removed (`Throttle was removed.`) |
| alter-topic-config | `kctl configs --entity-type topics --alter`: `unclean.leader.election.enable` set true or false or deleted, `min.insync.replicas` set or deleted |
| alter-broker-default | `kctl configs --entity-type brokers --entity-default --alter`: the cluster default `unclean.leader.election.enable` set true or false or deleted |
| preferred-election | ElectLeaders(PREFERRED) for one topic, or for every partition |
| controlled-shutdown | SIGTERM a node, wait for its exit (code 0 expected), restart it |

The draws use a fixed number of random numbers per operation; what they pick among (the topics,
the live brokers) is read from ZooKeeper at that moment.

Throttles are handled as the tool tells an operator to ("You must run Verify periodically, until
the reassignment completes, to ensure the throttle is removed"): a throttled reassignment stays
`throttled` (pending) until a verify finds it completed and removes the throttle; a new
reassignment verifies the pending one first and waits for it. If a partition of it failed (its
topic was deleted meanwhile), verify keeps the throttle, as Kafka's does, and the operator
removes it by hand (`kctl configs --delete-config`, the same keys). `finish()` is the end of the
soak: the pending throttle verified away, then the last throttled reassignment verified once
more with every broker up (verify removes the rate only from brokers registered at that
moment). Replica lists of earlier reassignments are not removed again: their own verify must
have done it.
"""
from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter, defaultdict
from typing import Callable, NamedTuple

from controller_core.values import TopicPartition

from adapters import admin
from adapters.admin import configs, throttle
from adapters.znodes import dynconfig
from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.zookeeper.session import NoNode, ZkError, ZkSession
from adapters.sim.chaos.faults import SETTLE_AFTER, Claims
from adapters.sim.chaos.fleet import Fleet

log = logging.getLogger("kctl.chaos")

WEIGHTS = {
    "create-topic": 2,
    "add-partitions": 2,
    "delete-topic": 2,
    "reassign": 2,
    "reassign-throttled": 2,
    "verify-reassignment": 2,
    "preferred-election": 2,
    "controlled-shutdown": 1,
    "alter-topic-config": 2,
    "alter-broker-default": 1,
}
THROTTLE_RANGE = (2_500_000, 10_000_000)  # bytes/s
MIN_ISR = "min.insync.replicas"
OPERATION_TIMEOUT = 30.0
SHUTDOWN_TIMEOUT = 120.0  # 4 ControlledShutdown attempts of up to 30 s each


class Draw(NamedTuple):
    kind: str
    a: float
    b: float
    seed: int  # for choices among what the cluster holds at the time
    pause: float


class Workload:
    def __init__(self, fleet: Fleet, zk: ZkSession, rng: random.Random, claims: Claims,
                 record: Callable[..., None], interval: float, kinds: dict[str, int] | None = None):
        self.fleet = fleet
        self.zk = zk
        self.rng = rng
        self.claims = claims
        self.record = record
        self.interval = interval
        weights = dict(kinds or WEIGHTS)
        self.kinds = sorted(weights)
        self.weights = [weights[k] for k in self.kinds]
        self.max_rf = fleet.config.rf
        self.outcomes: dict[str, Counter[str]] = defaultdict(Counter)
        self.deletions: dict[str, float] = {}  # topic -> when its deletion was requested
        self.reassignments: dict[TopicPartition, tuple[int, ...]] = {}  # the last target requested
        self.last_file: list[tuple[TopicPartition, tuple[int, ...]]] = []  # the last reassignment executed
        self.throttled: list[tuple[TopicPartition, tuple[int, ...]]] | None = None  # its throttle not removed yet
        self.last_throttled: list[tuple[TopicPartition, tuple[int, ...]]] = []  # the last one verified away
        self.throttles = Counter()  # set, rate-changed, removed, removed-by-hand
        self.created = 0
        self.shutdowns: set[asyncio.Task] = set()

    def draw(self) -> Draw:
        rng = self.rng
        kind = rng.choices(self.kinds, self.weights)[0]
        return Draw(kind, rng.random(), rng.random(), rng.randrange(2**31), self.interval * rng.uniform(0.5, 1.5))

    async def run(self, until: float) -> None:
        while True:
            d = self.draw()
            await asyncio.sleep(min(d.pause, max(0.0, until - time.monotonic())))
            if time.monotonic() >= until:
                return
            if d.kind == "controlled-shutdown":  # takes long: runs beside the other operations
                task = asyncio.create_task(self._operate(d, timeout=None), name="controlled-shutdown")
                self.shutdowns.add(task)
                task.add_done_callback(self.shutdowns.discard)
            else:
                await self._operate(d, timeout=OPERATION_TIMEOUT)

    async def stop(self) -> None:
        """Let running controlled shutdowns finish (they restart their node), up to a limit."""
        tasks = list(self.shutdowns)
        if tasks:
            await asyncio.wait(tasks, timeout=SHUTDOWN_TIMEOUT + 30)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _operate(self, d: Draw, timeout: float | None) -> None:
        operation = getattr(self, "_" + d.kind.replace("-", "_"))
        try:
            async with asyncio.timeout(timeout):
                outcome, detail = await operation(d)
        except admin.AdminError as exc:
            outcome, detail = "refused", str(exc)
        except (admin.ToolFailure, ZkError, TimeoutError, OSError) as exc:
            outcome, detail = "failed", f"{type(exc).__name__}: {exc}"
        if outcome is None:
            return  # nothing to do (no topic to pick, no node free)
        self.outcomes[d.kind][outcome] += 1
        self.record("admin", d.kind, outcome=outcome, detail=detail)


    # -- reading ---------------------------------------------------------------------------------

    async def _topics(self) -> list[str]:
        """Topics that exist and are not marked for deletion, sorted."""
        try:
            names = await self.zk.get_children(zkpaths.TOPICS)
        except NoNode:
            names = []
        try:
            marked = set(await self.zk.get_children(zkpaths.DELETE_TOPICS))
        except NoNode:
            marked = set()
        return sorted(set(names) - marked)

    async def _assignment(self, topic: str) -> dict:
        data, _ = await self.zk.get(zkpaths.topic(topic))
        return zkdata.decode_topic_assignment(data, topic=topic)

    # -- operations: each returns (outcome or None, detail) ---------------------------------------

    async def _create_topic(self, d: Draw):
        self.created += 1
        name = f"chaos-{self.created}"
        partitions = 2 + int(d.a * 10)
        rf = 2 + int(d.b * (self.max_rf - 1)) if self.max_rf >= 2 else 1
        await admin.create_topic(self.zk, name, partitions=partitions, replication_factor=rf, seed=d.seed)
        return "ok", f"{name}: {partitions} partitions, replication factor {rf}"

    async def _add_partitions(self, d: Draw):
        topics = await self._topics()
        if not topics:
            return None, ""
        topic = topics[int(d.a * len(topics))]
        current = len(await self._assignment(topic))
        total = current + 1 + int(d.b * 4)
        await admin.add_partitions(self.zk, topic, total)
        return "ok", f"{topic}: {current} -> {total} partitions"

    async def _delete_topic(self, d: Draw):
        topics = [t for t in await self._topics() if t.startswith("chaos-")]
        if not topics:
            return None, ""
        topic = topics[int(d.a * len(topics))]
        await admin.delete_topics(self.zk, topic)
        self.deletions[topic] = time.time()
        return "ok", topic

    async def _reassign(self, d: Draw, throttle: bool = False):
        topics = await self._topics()
        if not topics:
            return None, ""
        pick = random.Random(d.seed)
        rate = pick.randrange(*THROTTLE_RANGE)
        if await admin.reassignment_running(self.zk):
            if throttle and self.throttled is not None:
                # Kafka's executeAssignment on a running reassignment: only its rate changes
                await admin.change_reassignment_throttle(self.zk, self.throttled, rate)
                self.throttles["rate-changed"] += 1
                return "ok", f"rate of the running reassignment changed to {rate} B/s"
            raise admin.AdminError("There is an existing assignment running.")
        if self.throttled is not None:
            outcome, detail = await self._verify_throttled()
            if self.throttled is not None:
                raise admin.AdminError(f"the throttled reassignment before is not verified yet ({detail})")
        topic = topics[int(d.a * len(topics))]
        assignment = await self._assignment(topic)
        live = sorted(await admin.live_brokers(self.zk))
        count = min(len(assignment), 1 + int(d.b * 4))
        entries = []
        for p in sorted(pick.sample(sorted(assignment), count)):
            rf = len(assignment[p].target_replicas)
            if rf > len(live):
                raise admin.AdminError(f"{len(live)} live brokers cannot hold {rf} replicas")
            entries.append((TopicPartition(topic, p), tuple(pick.sample(live, rf))))
        if throttle:
            self.throttled = entries  # from here on a throttle may be written: verify must clear it
        try:
            await admin.execute_reassignment(self.zk, entries, throttle=rate if throttle else None)
        except admin.AdminError:
            if throttle:
                self.throttled = None  # refused before anything was written
            raise
        if throttle:
            self.throttles["set"] += 1
        self.last_file = entries
        self.reassignments.update(entries)
        moves = ", ".join(f"{tp} -> {','.join(map(str, r))}" for tp, r in entries)
        return "ok", moves + (f" (throttle {rate} B/s)" if throttle else "")

    async def _reassign_throttled(self, d: Draw):
        return await self._reassign(d, throttle=True)

    async def _verify_reassignment(self, d: Draw):
        if self.throttled is not None:
            return await self._verify_throttled()
        if not self.last_file:
            return None, ""
        statuses = await admin.verify_reassignment(self.zk, self.last_file)
        return "ok", _statuses(statuses)

    async def _verify_throttled(self):
        """`--verify` of the pending throttled reassignment (its throttle removed once it completed)."""
        entries = self.throttled
        statuses = await admin.verify_reassignment(self.zk, entries)
        detail = _statuses(statuses)
        if any(s == admin.REASSIGNMENT_IN_PROGRESS for _, s in statuses):
            return "ok", detail
        topics = [tp.topic for tp, _ in entries]
        if all(s == admin.REASSIGNMENT_COMPLETED for _, s in statuses):
            removed = await admin.remove_reassignment_throttle(self.zk, topics)
            self.throttles["removed"] += 1
            detail += "; Throttle was removed." if removed else "; no throttle left to remove"
        else:
            # verify keeps the throttle when a partition failed: the operator removes it by hand
            await admin.remove_reassignment_throttle(self.zk, topics)
            self.throttles["removed-by-hand"] += 1
            detail += "; throttle removed by hand (kctl configs --delete-config)"
        self.throttled = None
        self.last_throttled = entries
        return "ok", detail

    async def finish(self) -> list[str]:
        """The operator's last steps once every node is back: the pending throttled reassignment
        verified (its throttle removed once it completed), then the last throttled one verified
        again, now with every broker registered: the removal `--verify` makes (the rate from
        every broker, the replica lists from that reassignment's topics). Returns the throttle
        keys found before that last removal: rates left on brokers that were down when their
        reassignment was verified (Kafka's verify does not reach them either), and anything an
        earlier verify failed to remove. Raises AdminError while the pending reassignment is
        still in progress."""
        if self.throttled is not None:
            await self._verify_throttled()
            if self.throttled is not None:
                raise admin.AdminError("the last throttled reassignment is still in progress")
        left = await throttle_keys(self.zk)
        if self.last_throttled and left:
            await admin.remove_reassignment_throttle(self.zk, sorted({tp.topic for tp, _ in self.last_throttled}))
        return left

    # -- dynamic configs -----------------------------------------------------------------------------

    async def _alter_topic_config(self, d: Draw):
        topics = await self._topics()
        if not topics:
            return None, ""
        topic = topics[int(d.b * len(topics))]
        rf = len(next(iter((await self._assignment(topic)).values())).replicas)
        add, delete = _config_change(d.a, rf)
        await configs.alter_config(self.zk, dynconfig.TOPICS, topic, add, delete)
        return "ok", f"topic {topic}: " + _shown(add, delete)

    async def _alter_broker_default(self, d: Draw):
        add, delete = _config_change(d.a * 0.6, None)  # the unclean part of the table only
        await configs.alter_config(self.zk, dynconfig.BROKERS, dynconfig.DEFAULT_ENTITY, add, delete)
        return "ok", "cluster default: " + _shown(add, delete)

    async def _preferred_election(self, d: Draw):
        if d.a < 0.3:
            partitions, what = None, "all partitions"
        else:
            topics = await self._topics()
            if not topics:
                return None, ""
            topic = topics[int(d.b * len(topics))]
            partitions = [TopicPartition(topic, p) for p in sorted(await self._assignment(topic))]
            what = topic
        results = await admin.elect_leaders(self.zk, "preferred", partitions, timeout=OPERATION_TIMEOUT - 5)
        elected = sum(1 for _, error in results if error is None)
        return "ok", f"{what}: {elected} of {len(results)} partitions moved to their preferred leader"

    async def _controlled_shutdown(self, d: Draw):
        if not self.claims.free():
            return None, ""
        eligible = [b for b in self.fleet.ids if b not in self.claims.nodes and self.fleet.running(b)
                    and b not in self.fleet.paused]
        if not eligible:
            return None, ""
        b = eligible[int(d.a * len(eligible))]
        self.claims.nodes.add(b)
        try:
            started = time.monotonic()
            code = await self.fleet.terminate(b, SHUTDOWN_TIMEOUT)
            took = time.monotonic() - started
            await asyncio.sleep(0.5 + 2 * d.b)
            await self.fleet.start_node(b)
            if code == 0:
                outcome, detail = "ok", f"node {b} exited 0 after {took:.1f} s, restarted"
            elif code is None:
                outcome, detail = "failed", f"node {b} did not exit within {SHUTDOWN_TIMEOUT:.0f} s of SIGTERM (killed)"
            else:
                outcome, detail = "failed", f"node {b} exited with code {code} after SIGTERM"
            await asyncio.sleep(SETTLE_AFTER)
            return outcome, detail
        finally:
            self.claims.nodes.discard(b)


def _statuses(statuses) -> str:
    counts = Counter(s for _, s in statuses)
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def _config_change(a: float, rf: int | None) -> tuple[dict[str, str], list[str]]:
    """What `a` (0-1) picks: unclean election on, off or back to the default; then (topics
    only) `min.insync.replicas` set to 1..rf or back to the default."""
    if a < 0.25:
        return {dynconfig.UNCLEAN_KEY: "true"}, []
    if a < 0.45:
        return {dynconfig.UNCLEAN_KEY: "false"}, []
    if a < 0.6 or rf is None:
        return {}, [dynconfig.UNCLEAN_KEY]
    if a < 0.85:
        return {MIN_ISR: str(1 + int((a - 0.6) / 0.25 * rf) % rf)}, []
    return {}, [MIN_ISR]


def _shown(add: dict, delete: list) -> str:
    return ", ".join([f"{k}={v}" for k, v in add.items()] + [f"{k} deleted" for k in delete])


async def throttle_keys(zk: ZkSession) -> list[str]:
    """Every throttle key in `/config/topics/*` and `/config/brokers/*`, as `<type>/<name>: key`."""
    out = []
    for entity_type, keys in ((dynconfig.TOPICS, throttle.REPLICA_KEYS), (dynconfig.BROKERS, throttle.RATE_KEYS)):
        for name in await dynconfig.entity_names(zk, entity_type):
            config, _ = await dynconfig.read_config(zk, entity_type, name)
            out.extend(f"{entity_type}/{name}: {k}" for k in keys if k in config)
    return out
