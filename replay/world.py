"""A simulated cluster around the pure core, for the journal generator (replay/generate.py).

The world plays every part the runtime and the outside world play for a live controller:
ZooKeeper (topic, state and admin znodes with versions, the controller epoch and its fencing
version), the brokers (registrations with epochs, request answers, partition leaders changing
their ISR), the admins (topic churn, reassignments, elections, config changes) and the failures
(brokers dying and returning, controlled shutdowns, controller failovers by crash, session
expiry or a zombie that is fenced on its next write).

Each controller-eligible node runs the same discipline as `adapters/controller/loop.py`: a batch of queued
events is appended to the node's journal first, then each event is stepped, its commands
executed, and an "effects" record with the commands' digest appended. The journal is the real
`adapters.journal.writer.Journal`, so what comes out is byte-compatible with a live controller's.

Everything random comes from one `random.Random(seed)`, and nothing iterates a set of strings
unsorted, so a seed always produces the same journals.
"""
from __future__ import annotations

import heapq
import random
from pathlib import Path

from adapters.journal.writer import Journal
from adapters.znodes.codec import new_cluster_id
from replay.collector import gc_paused
from replay.digest import digest as fast_digest
from replay.shell import PartitionStates
from controller_core import codec
from controller_core import commands as C
from controller_core import events as E
from controller_core.state import ControllerConfig, initial_state
from controller_core.step import step
from controller_core.values import BrokerInfo, LeaderIsr, ReplicaAssignment, TopicPartition

PROGRESS_MIN, PROGRESS_PARTS = 4000, 4
"""As adapters/controller/zkwriter.py: a write of that many states reports its progress by quarters."""

START_AT = 1_700_000_000_000
UNCLEAN_KEY = "unclean.leader.election.enable"


class Node:
    """A controller-eligible broker: a controller loop with its journal."""

    def __init__(self, world: "World", broker_id: int):
        self.world = world
        self.id = broker_id
        self.config = ControllerConfig(broker_id=broker_id, leader_imbalance_check_interval_seconds=60)
        self.state = initial_state(self.config)
        self.queue: list = []
        self.journal: Journal | None = None
        self.epoch_for_journal = 0
        self.fenced = False  # the ZooKeeper writer saw a failed epoch check: execute nothing more
        self.timers: dict[str, int] = {}  # name -> token of the pending firing
        self.running = False
        self.running_at_close = False

    # the loop -----------------------------------------------------------------------------

    def start(self) -> None:
        w = self.world
        self.journal = Journal.open(w.out / f"node-{self.id}", self.id, fsync="never",
                                    segment_bytes=w.segment_bytes, compress_closed=w.compress,
                                    snapshot_provider=self._snapshot, cluster_id=w.cluster_id)
        self.state = initial_state(self.config)
        self.epoch_for_journal = 0
        self.fenced = False
        self.queue.clear()
        self.timers.clear()
        self.running = True

    def crash(self) -> None:
        """The process dies: whatever is queued is lost, the journal keeps what was written."""
        self.running = False
        self.queue.clear()
        self.timers.clear()
        if self.journal is not None:
            self.journal.close()
            self.journal = None

    def _snapshot(self):
        return self.state.epoch, {"state": codec.encode_state(self.state)}

    def put(self, event) -> None:
        if self.running:
            self.queue.append(event)

    def process_some(self) -> int:
        """One batch, as ControllerLoop._process_batch: append all, then decide one by one."""
        if not self.queue:
            return 0
        # the cyclic collector waits until the batch is done: a decision over 10,000 partitions
        # allocates hundreds of thousands of acyclic values, and the collections they would
        # trigger mid-step walk the whole heap (a fifth of the generator's CPU, measured)
        with gc_paused():
            return self._process_batch()

    def _process_batch(self) -> int:
        n = min(len(self.queue), self.world.rng.choice((1, 1, 1, 2, 3, 5)))
        batch, self.queue = self.queue[:n], self.queue[n:]
        appended = []
        for event in batch:
            if isinstance(event, E.ControllerElected):
                self.epoch_for_journal = event.epoch
            seq = self.journal.append("event", codec.encode_event(event), controller_epoch=self.epoch_for_journal,
                                      at=event.at)
            appended.append((event, seq))
        for event, seq in appended:
            state, commands = step(self.state, event)
            self.state = state
            self.epoch_for_journal = state.epoch
            if isinstance(event, E.ControllerElected):
                self.fenced = False  # a new term: the ZooKeeper writer is reset
            self.world.execute(self, commands, state)
            # replay.digest writes the same bytes as codec.digest, several times faster on the
            # large UpdateMetadata fan-outs (tests/replay/test_fold.py checks they agree)
            self.journal.append("effects", {"event_seq": seq, "count": len(commands), "digest": fast_digest(commands)},
                                controller_epoch=state.epoch, at=event.at)
            if not self.running:  # executing a command may have crashed the node
                break
        return len(appended)


class World:
    def __init__(self, out: Path, *, seed: int, partitions: int, controllers: int = 3, brokers: int | None = None,
                 segment_bytes: int = 4 << 20, compress: bool = True, replication: int = 3):
        self.out = Path(out)
        self.rng = random.Random(seed)
        # a cluster id of its own per seed (two generated lives are two clusters), drawn apart
        # from `rng` so that it changes none of the life's random choices
        self.cluster_id = new_cluster_id(random.Random(f"cluster-id-{seed}").randbytes(16))
        self.target_partitions = partitions
        self.segment_bytes = segment_bytes
        self.compress = compress
        self.now = START_AT
        self.events = 0  # events journaled, over all nodes
        n_brokers = brokers if brokers is not None else max(controllers, 5)
        if n_brokers < controllers or controllers < 1:
            raise ValueError("need at least one controller and no more controllers than brokers")
        self.broker_ids = list(range(1, n_brokers + 1))
        self.replication = min(replication, n_brokers)
        self.nodes = {b: Node(self, b) for b in range(1, controllers + 1)}
        self.czxid = 100
        self.registered: dict[int, BrokerInfo] = {}
        # ZooKeeper
        self.topics: dict[str, dict[int, ReplicaAssignment]] = {}
        self.states: dict[TopicPartition, LeaderIsr] = {}
        self.zookeeper = PartitionStates(self.states, lambda topic: topic in self.topics)
        self.configs: dict[str, tuple] = {}
        self.delete_markers: set[str] = set()
        self.plan: tuple = ()
        self.plan_version = -1  # znode versions, as ZooKeeper keeps them (-1: absent)
        self.preferred: tuple = ()
        self.preferred_version = -1
        self.controller: int | None = None  # holder of /controller
        self.epoch = 0
        self.epoch_version = 0
        self.watched: set[TopicPartition] = set()
        # the schedule: (time, n, callable)
        self.pending: list = []
        self.counter = 0
        self.request_id = 0
        self.topic_counter = 0
        self.shutdown_attempts: dict[int, int] = {}
        self.election_scheduled = False
        self.last_isr_change: dict[str, int] = {}
        self.stats: dict[str, int] = {}

    # scheduling ---------------------------------------------------------------------------

    def later(self, delay_ms: int, fn, *args) -> None:
        self.counter += 1
        heapq.heappush(self.pending, (self.now + max(0, int(delay_ms)), self.counter, fn, args))

    def deliver(self, node_id: int, event_factory) -> None:
        """Put an event (stamped now) in a node's queue."""
        node = self.nodes.get(node_id)
        if node is not None and node.running:
            node.put(event_factory(self.now))

    def to_controller(self, delay_ms: int, make) -> None:
        """A watch fires on the active controller (if any, and still the holder on delivery)."""
        def fire():
            if self.controller is not None:
                self.deliver(self.controller, make)
        self.later(delay_ms, fire)

    def count(self, what: str) -> None:
        self.stats[what] = self.stats.get(what, 0) + 1

    # brokers --------------------------------------------------------------------------------

    def register(self, broker_id: int) -> None:
        self.czxid += self.rng.randint(1, 50)
        self.registered[broker_id] = BrokerInfo(broker_id, "127.0.0.1", 9090 + broker_id, self.czxid,
                                                f"r{broker_id % 2}" if broker_id % 3 else None)

    def listing(self) -> tuple[BrokerInfo, ...]:
        return tuple(self.registered[b] for b in sorted(self.registered))

    def brokers_changed(self, delay_ms: int = 5) -> None:
        self.to_controller(delay_ms, lambda at: E.BrokersChanged(at=at, brokers=self.listing()))

    # ZooKeeper snapshot for a new controller ---------------------------------------------------

    def cluster_snapshot(self) -> E.ClusterSnapshot:
        topics = tuple((t, tuple(sorted(self.topics[t].items()))) for t in sorted(self.topics))
        return E.ClusterSnapshot(
            brokers=self.listing(),
            topics=topics,
            topic_configs=tuple((t, self.configs[t]) for t in sorted(self.configs) if t in self.topics),
            partition_states=tuple(sorted(self.states.items())),
            topics_to_delete=frozenset(self.delete_markers),
            reassignment=(E.ReassignmentRequested(at=self.now, exists=True, partitions=self.plan,
                                                  zk_version=self.plan_version) if self.plan else None),
            preferred_election=(E.PreferredElectionRequested(at=self.now, exists=True, partitions=self.preferred,
                                                             zk_version=self.preferred_version)
                                if self.preferred else None),
        )

    def schedule_election(self, delay_ms: int) -> None:
        if not self.election_scheduled:
            self.election_scheduled = True
            self.later(delay_ms, self.elect)

    def elect(self) -> None:
        """Every live eligible node races for /controller; one wins (epoch + 1)."""
        self.election_scheduled = False
        if self.controller is not None:
            return
        candidates = sorted(b for b, n in self.nodes.items() if n.running and b in self.registered)
        if not candidates:
            return
        winner = self.nodes[self.rng.choice(candidates)]
        self.epoch += 1
        self.epoch_version += 1
        self.controller = winner.id
        self.watched = set()
        self.count("elections")
        winner.journal.roll()  # as ClusterNode._become_controller: the term starts a segment
        epoch, version = self.epoch, self.epoch_version
        self.later(self.rng.randint(5, 40), self._elected, winner.id, epoch, version)

    def _elected(self, node_id: int, epoch: int, version: int) -> None:
        if self.controller == node_id and self.epoch == epoch:
            snap = self.cluster_snapshot()
            self.deliver(node_id, lambda at: E.ControllerElected(at=at, epoch=epoch, epoch_zk_version=version,
                                                                 snapshot=snap))

    # executing commands ------------------------------------------------------------------------

    def execute(self, node: Node, commands: tuple, state) -> None:
        if not state.active:  # as the Executor: an inactive controller has no timers
            node.timers.clear()
        if node.fenced and not any(type(c) is C.Resign for c in commands):
            return
        for c in commands:
            kind = type(c)
            handler = _EXEC.get(kind)
            if handler is not None:
                handler(self, node, c, state)
                if node.fenced and kind is not C.Resign:
                    return

    def _fence_check(self, node: Node, state) -> bool:
        if state.epoch_zk_version == self.epoch_version and self.controller == node.id:
            return True
        node.fenced = True
        self.count("fenced writes")
        at_node = node.id
        self.later(self.rng.randint(1, 10), self.deliver, at_node,
                   lambda at: E.ControllerFenced(at=at, reason="the /controller_epoch version check failed"))
        return False

    def _write_states(self, node: Node, c: C.WritePartitionStates, state) -> None:
        if not self._fence_check(node, state):
            return
        outcome = self.zookeeper.write(c, 0)  # its time is the delivery's, below
        conflicts = outcome.conflicts
        if conflicts:
            self.count("write conflicts")
        write_id = c.write_id
        delay = self.rng.randint(1, 25)
        if len(c.writes) >= PROGRESS_MIN:  # a large write reports its progress first, as the live writer does
            failed = {tp for tp, _ in conflicts}
            landed = [pw.tp for pw in c.writes if pw.tp not in failed]
            every = len(c.writes) // PROGRESS_PARTS
            for i in range(0, min(len(landed) - every + 1, every * (PROGRESS_PARTS - 1)), every):
                group = tuple(landed[i:i + every])
                self.later(delay, self.deliver, node.id,
                           lambda at, group=group: E.PartitionStatesWritten(at=at, write_id=write_id, landed=group,
                                                                            final=False))
                delay += 1
        self.later(delay, self.deliver, node.id,
                   lambda at: E.PartitionStatesWritten(at=at, write_id=write_id, conflicts=tuple(conflicts)))
        # landed writes are at their predicted versions: not listed, as adapters/controller/zkwriter.py does

    def _write_topic(self, node: Node, c: C.WriteTopicAssignment, state) -> None:
        if not self._fence_check(node, state):
            return
        if c.topic not in self.topics:
            return
        self.topics[c.topic] = dict(c.partitions)
        for p, ra in c.partitions:
            if ra.adding:
                self.later(self.rng.randint(30, 600), self._catch_up, TopicPartition(c.topic, p))
        topic = c.topic
        self.to_controller(3, lambda at: E.TopicsChanged(at=at, topics=frozenset(self.topics), assignments=(
            (topic, tuple(sorted(self.topics[topic].items()))),) if topic in self.topics else ()))

    def _delete_topic(self, node: Node, c: C.DeleteTopic, state) -> None:
        if not self._fence_check(node, state):
            return
        t = c.topic
        self.count("topics deleted")
        for p in list(self.topics.get(t, {})):
            self.states.pop(TopicPartition(t, p), None)
            self.watched.discard(TopicPartition(t, p))
        self.topics.pop(t, None)
        self.configs.pop(t, None)
        self.delete_markers.discard(t)
        self.to_controller(2, lambda at: E.TopicZnodesDeleted(at=at, topic=t))  # the writer's report, first
        self.to_controller(3, lambda at: E.TopicsChanged(at=at, topics=frozenset(self.topics)))
        self.to_controller(4, lambda at: E.TopicDeletionsRequested(at=at, topics=frozenset(self.delete_markers)))

    def _delete_markers(self, node: Node, c: C.DeleteTopicDeletionRequests, state) -> None:
        if not self._fence_check(node, state):
            return
        self.delete_markers.difference_update(c.topics)
        self.to_controller(3, lambda at: E.TopicDeletionsRequested(at=at, topics=frozenset(self.delete_markers)))

    def _write_plan(self, node: Node, c: C.WriteReassignmentPlan, state) -> None:
        if not self._fence_check(node, state):
            return
        if c.expected_version not in (-1, self.plan_version) or (c.partitions and not self.plan):
            return  # ZooKeeper refuses it (BadVersion, NoNode): a newer request is there
        self.plan = c.partitions
        self.plan_version = self.plan_version + 1 if self.plan else -1
        # the live watches do not deliver the controller's own writes back (adapters/controller/watches.py)

    def _delete_preferred(self, node: Node, c, state) -> None:
        if not self._fence_check(node, state):
            return
        if c.expected_version not in (-1, self.preferred_version):
            return
        self.preferred, self.preferred_version = (), -1

    def _send_lai(self, node: Node, c: C.SendLeaderAndIsr, state) -> None:
        if c.broker_id not in self.registered:
            return
        broker = c.broker_id
        errors = ()
        if self.rng.random() < 0.002 and c.partitions:
            errors = ((c.partitions[0].tp, "KAFKA_STORAGE_ERROR: simulated disk failure"),)
        self.later(self.rng.randint(1, 30), self.deliver, node.id,
                   lambda at: E.LeaderAndIsrResponded(at=at, broker_id=broker, errors=errors))

    def _send_stop(self, node: Node, c: C.SendStopReplica, state) -> None:
        if c.broker_id not in self.registered:
            return
        broker, delete, tps = c.broker_id, c.delete, c.partitions
        errors = ()
        if delete and self.rng.random() < 0.05:
            errors = ((tps[0], "KAFKA_STORAGE_ERROR: simulated failure"),)
        self.later(self.rng.randint(1, 40), self.deliver, node.id,
                   lambda at: E.StopReplicaResponded(at=at, broker_id=broker, delete=delete, partitions=tps,
                                                     errors=errors))

    def _reply_shutdown(self, node: Node, c: C.ReplyControlledShutdown, state) -> None:
        b = c.broker_id
        if b not in self.shutdown_attempts:
            return
        if c.error is None and not c.partitions_remaining or self.shutdown_attempts[b] >= 3:
            del self.shutdown_attempts[b]
            self.later(self.rng.randint(5, 50), self.stop_broker, b, "controlled shutdown")
        else:
            self.later(self.rng.randint(50, 300), self.request_shutdown, b)

    def _timer(self, node: Node, c: C.ScheduleTimer, state) -> None:
        self.counter += 1
        token = self.counter
        node.timers[c.name] = token
        name = c.name

        def fire():
            if node.timers.get(name) == token:
                del node.timers[name]
                self.deliver(node.id, lambda at: E.TimerFired(at=at, name=name))
        self.later(c.delay_ms, fire)

    def _cancel_timer(self, node: Node, c: C.CancelTimer, state) -> None:
        node.timers.pop(c.name, None)

    def _watch(self, node: Node, c, state) -> None:
        if self.controller == node.id:
            self.watched.update(c.partitions)

    def _reread(self, node: Node, c: C.ReadPartitionStates, state) -> None:
        # a read needs no fencing; it answers with the states as they are when it lands
        self.later(self.rng.randint(1, 5), self.deliver, node.id, lambda at: self.zookeeper.read(c, at))

    def _unwatch(self, node: Node, c, state) -> None:
        if self.controller == node.id:
            self.watched.difference_update(c.partitions)

    def _resign(self, node: Node, c: C.Resign, state) -> None:
        node.fenced = False
        if self.controller == node.id:  # still ours: delete /controller so that a fresh election runs
            self.controller = None
            self.schedule_election(self.rng.randint(5, 50))

    # partition leaders (brokers) ---------------------------------------------------------------

    def leader_isr_write(self, tp: TopicPartition, isr: tuple[int, ...], source: str) -> None:
        li = self.states.get(tp)
        if li is None:
            return
        self.last_isr_change[tp.topic] = self.now
        new = LeaderIsr(li.leader, li.leader_epoch, isr, li.controller_epoch, li.zk_version + 1)
        self.states[tp] = new
        self.count("isr changes")
        self.to_controller(self.rng.randint(2, 60),
                           lambda at: E.PartitionStatesObserved(at=at, states=((tp, self.states.get(tp)),),
                                                                source="isr_change"))
        if tp in self.watched:
            self.to_controller(self.rng.randint(1, 10),
                               lambda at: E.PartitionStatesObserved(at=at, states=((tp, self.states.get(tp)),),
                                                                    source="reassignment"))

    def _catch_up(self, tp: TopicPartition) -> None:
        ra = self.topics.get(tp.topic, {}).get(tp.partition)
        li = self.states.get(tp)
        if ra is None or li is None or not ra.adding or li.leader not in self.registered:
            return
        joined = [r for r in ra.adding if r in self.registered and r not in li.isr]
        if joined:
            self.leader_isr_write(tp, li.isr + tuple(joined), "reassignment")
        if any(r not in self.registered for r in ra.adding):
            self.later(self.rng.randint(200, 2000), self._catch_up, tp)

    def random_isr_change(self) -> None:
        if not self.states:
            return
        tp = self._random_partition()
        if tp is None:
            return
        li = self.states.get(tp)
        ra = self.topics[tp.topic].get(tp.partition)
        if li is None or ra is None or li.leader not in self.registered:
            return
        outside = [r for r in ra.replicas if r not in li.isr and r in self.registered]
        if outside:  # a follower caught up
            self.leader_isr_write(tp, li.isr + (self.rng.choice(outside),), "isr_change")
        elif len(li.isr) > 1 and self.rng.random() < 0.5:  # a follower fell behind
            followers = [r for r in li.isr if r != li.leader]
            if followers:
                drop = self.rng.choice(followers)
                self.leader_isr_write(tp, tuple(r for r in li.isr if r != drop), "isr_change")

    def _random_partition(self) -> TopicPartition | None:
        names = self._topic_names()
        if not names:
            return None
        t = self.rng.choice(names)
        parts = self.topics[t]
        return TopicPartition(t, self.rng.randrange(len(parts)))

    def _topic_names(self) -> list[str]:
        if getattr(self, "_names_cache_key", None) != len(self.topics) + 7919 * self.topic_counter:
            self._names = sorted(self.topics)
            self._names_cache_key = len(self.topics) + 7919 * self.topic_counter
        return self._names

    # admin actions ---------------------------------------------------------------------------

    def assign(self, n_partitions: int, start: int | None = None, rf: int | None = None) -> dict[int, ReplicaAssignment]:
        live = sorted(self.registered) or self.broker_ids
        rf = min(rf or self.replication, len(live))
        start = self.rng.randrange(len(live)) if start is None else start
        shift = self.rng.randrange(1, max(2, len(live)))
        out = {}
        for p in range(n_partitions):
            first = (start + p) % len(live)
            replicas = [live[first]]
            for k in range(1, rf):
                replicas.append(live[(first + k * shift + (p // len(live))) % len(live)])
            replicas = list(dict.fromkeys(replicas))
            k = 0
            while len(replicas) < rf:
                if live[k] not in replicas:
                    replicas.append(live[k])
                k += 1
            out[p] = ReplicaAssignment(tuple(replicas))
        return out

    def create_topic(self, n_partitions: int, notify: bool = True) -> str:
        self.topic_counter += 1
        name = f"t{self.topic_counter:05d}"
        self.topics[name] = self.assign(n_partitions)
        self.count("topics created")
        if notify:
            self.to_controller(3, lambda at: E.TopicsChanged(at=at, topics=frozenset(self.topics), assignments=(
                (name, tuple(sorted(self.topics[name].items()))),) if name in self.topics else ()))
        return name

    def partition_count(self) -> int:
        return sum(len(p) for p in self.topics.values())

    def action_topic_churn(self) -> None:
        names = [t for t in self._topic_names() if t not in self.delete_markers]
        total = self.partition_count()
        if names and (total > self.target_partitions or self.rng.random() < 0.4):
            quiet = [t for t in names if self.now - self.last_isr_change.get(t, -10**9) > 1000]
            small = [t for t in quiet if len(self.topics[t]) <= 50] or quiet
            if not small:
                return
            t = self.rng.choice(small)
            self.delete_markers.add(t)
            self.to_controller(3, lambda at: E.TopicDeletionsRequested(at=at, topics=frozenset(self.delete_markers)))
        else:
            self.create_topic(self.rng.randint(1, max(1, min(50, self.target_partitions // 20))))

    def action_expand(self) -> None:
        names = [t for t in self._topic_names() if t not in self.delete_markers]
        if not names or self.partition_count() > self.target_partitions:
            return
        t = self.rng.choice(names)
        parts = dict(self.topics[t])
        rf = len(next(iter(parts.values())).target_replicas)
        extra = self.assign(self.rng.randint(1, 3), rf=rf)
        for k, ra in extra.items():
            parts[len(parts)] = ra if len(ra.replicas) == rf else ReplicaAssignment(ra.replicas[:rf])
        if any(len(ra.replicas) != rf for ra in parts.values()):
            return
        self.topics[t] = parts
        self.count("partitions added")
        self.to_controller(3, lambda at: E.TopicsChanged(at=at, topics=frozenset(self.topics), assignments=(
            (t, tuple(sorted(self.topics[t].items()))),) if t in self.topics else ()))

    def action_config(self) -> None:
        names = self._topic_names()
        if not names:
            return
        t = self.rng.choice(names)
        enable = self.rng.random() < 0.3
        self.configs[t] = ((UNCLEAN_KEY, "true" if enable else "false"),)
        config = self.configs[t]
        self.to_controller(3, lambda at: E.TopicConfigsChanged(at=at, configs=((t, config),)))

    def action_reassign(self) -> None:
        live = sorted(self.registered)
        entries = dict(self.plan)
        for _ in range(self.rng.randint(1, 4)):
            tp = self._random_partition()
            if tp is None or tp.topic in self.delete_markers:
                continue
            rf = len(self.topics[tp.topic][tp.partition].target_replicas)
            pool = live if self.rng.random() < 0.9 else self.broker_ids  # sometimes a dead target: halts
            if len(pool) < rf:
                continue
            entries[tp] = tuple(self.rng.sample(pool, rf))
        if not entries:
            return
        self.plan_version = self.plan_version + 1 if self.plan else 0
        self.plan = tuple(sorted(entries.items()))
        plan, version = self.plan, self.plan_version
        self.count("reassignments requested")
        self.to_controller(3, lambda at: E.ReassignmentRequested(at=at, exists=True, partitions=plan, zk_version=version))

    def action_preferred(self) -> None:
        tps = sorted({tp for tp in (self._random_partition() for _ in range(self.rng.randint(1, 5))) if tp})
        if not tps:
            return
        self.preferred_version = self.preferred_version + 1 if self.preferred else 0
        self.preferred = tuple(tps)
        pref, version = self.preferred, self.preferred_version
        self.to_controller(3, lambda at: E.PreferredElectionRequested(at=at, exists=True, partitions=pref,
                                                                      zk_version=version))

    def action_elect_leaders(self) -> None:
        self.request_id += 1
        rid = self.request_id
        kind = "unclean" if self.rng.random() < 0.2 else "preferred"
        tps = sorted({tp for tp in (self._random_partition() for _ in range(self.rng.randint(1, 4))) if tp})
        if self.controller is not None:
            self.deliver(self.controller, lambda at: E.LeaderElectionRequested(
                at=at, request_id=rid, election_type=kind, partitions=tuple(tps)))
        # a tool that picked a stale controller: the inactive node answers NOT_CONTROLLER
        others = sorted(b for b, n in self.nodes.items() if n.running and b != self.controller)
        if others and self.rng.random() < 0.1:
            self.deliver(self.rng.choice(others), lambda at: E.LeaderElectionRequested(
                at=at, request_id=rid, election_type=kind, partitions=tuple(tps)))

    # failures --------------------------------------------------------------------------------

    def stop_broker(self, b: int, why: str) -> None:
        if b not in self.registered:
            return
        del self.registered[b]
        self.count(f"broker stops ({why})")
        node = self.nodes.get(b)
        if node is not None and node.running:
            was_controller = self.controller == b
            node.crash()
            if was_controller:
                self.controller = None
                self.schedule_election(self.rng.randint(50, 500))
            self.later(self.rng.randint(1000, 15000), self.restart_node, b)
        else:
            self.later(self.rng.randint(1000, 15000), self.start_broker, b)
        self.brokers_changed(self.rng.randint(5, 100))

    def start_broker(self, b: int) -> None:
        if b in self.registered:
            return
        self.register(b)
        self.brokers_changed(self.rng.randint(2, 30))

    def restart_node(self, b: int) -> None:
        node = self.nodes[b]
        if not node.running:
            node.start()
        self.start_broker(b)
        if self.controller is None:
            self.schedule_election(self.rng.randint(5, 50))

    def action_broker_failure(self) -> None:
        live = sorted(self.registered)
        if len(live) <= 2:
            return
        self.stop_broker(self.rng.choice(live), "failure")

    def action_bounce(self) -> None:
        live = sorted(b for b in self.registered if b not in self.nodes)
        if not live:
            return
        b = self.rng.choice(live)
        self.register(b)  # a new session: a larger broker epoch, never seen absent
        self.count("broker bounces")
        self.brokers_changed(self.rng.randint(2, 30))

    def request_shutdown(self, b: int) -> None:
        if b not in self.registered or b not in self.shutdown_attempts:
            self.shutdown_attempts.pop(b, None)
            return
        self.shutdown_attempts[b] += 1
        self.request_id += 1
        rid, epoch = self.request_id, self.registered[b].epoch
        if self.controller is None:
            self.later(200, self.request_shutdown, b)
            return
        self.deliver(self.controller, lambda at: E.ControlledShutdownRequested(
            at=at, request_id=rid, broker_id=b, broker_epoch=epoch))

    def action_controlled_shutdown(self) -> None:
        live = sorted(b for b in self.registered if b not in self.shutdown_attempts)
        if len(live) <= 2:
            return
        b = self.rng.choice(live)
        self.shutdown_attempts[b] = 0
        self.count("controlled shutdowns")
        self.request_shutdown(b)

    def action_failover(self) -> None:
        """The controller loses /controller: by crashing, by session expiry (it is told), or as a
        zombie that only learns it when a write of its own fails the epoch check."""
        old = self.controller
        if old is None:
            return
        kind = self.rng.choice(("crash", "expire", "zombie"))
        self.count(f"failovers ({kind})")
        if kind == "crash":
            self.stop_broker(old, "controller crash")
            return
        self.controller = None
        self.schedule_election(self.rng.randint(20, 200))
        epoch = self.epoch
        if kind == "expire":
            self.later(self.rng.randint(5, 400), self.resign_if_still, old, epoch, "ZooKeeper session expired")
            self.register(old)  # the new session re-registers the broker with a larger epoch
            self.brokers_changed(self.rng.randint(300, 600))
        else:  # the zombie learns of the expiry late, if no write of its own fenced it first
            self.later(self.rng.randint(2000, 20000), self.resign_if_still, old, epoch,
                       "ZooKeeper session expired (noticed late)")

    def resign_if_still(self, node_id: int, epoch: int, reason: str) -> None:
        node = self.nodes[node_id]
        if node.running and node.state.active and node.state.epoch == epoch:
            self.deliver(node_id, lambda at: E.ControllerResigned(at=at, reason=reason))

    # the main loop ---------------------------------------------------------------------------

    ACTIONS = (
        ("random_isr_change", 55.0),
        ("action_elect_leaders", 1.5),
        ("action_preferred", 1.0),
        ("action_reassign", 0.25),
        ("action_topic_churn", 0.6),
        ("action_expand", 0.3),
        ("action_config", 0.5),
        ("action_broker_failure", 0.01),
        ("action_bounce", 0.01),
        ("action_controlled_shutdown", 0.008),
        ("action_failover", 0.004),
    )

    def bootstrap(self) -> None:
        for b in self.broker_ids:
            self.register(b)
        for node in self.nodes.values():
            node.start()
        per_topic = max(1, min(100, self.target_partitions // 10 or 1))
        while self.partition_count() + per_topic <= self.target_partitions:
            self.create_topic(per_topic, notify=False)
        rest = self.target_partitions - self.partition_count()
        if rest > 0:
            self.create_topic(rest, notify=False)
        self.elect()

    def run(self, n_events: int, progress=None) -> None:
        """Run the cluster until the nodes have journaled at least `n_events` events."""
        self.bootstrap()
        names, weights = zip(*self.ACTIONS)
        scripted = sorted({int(n_events * f) for f in (0.15, 0.3, 0.45, 0.6, 0.75, 0.9)})
        script = ["action_broker_failure", "action_failover", "action_controlled_shutdown", "action_failover",
                  "action_broker_failure", "action_failover"]
        nodes = [self.nodes[b] for b in sorted(self.nodes)]
        report_every = max(1, n_events // 100)
        next_report = report_every
        while self.events < n_events:
            self.now += 1 + int(self.rng.expovariate(1 / 3))
            while self.pending and self.pending[0][0] <= self.now:
                _, _, fn, args = heapq.heappop(self.pending)
                fn(*args)
            if scripted and self.events >= scripted[0]:
                scripted.pop(0)
                getattr(self, script[(len(script) - len(scripted) - 1) % len(script)])()
            elif self.rng.random() < 0.6:
                getattr(self, self.rng.choices(names, weights)[0])()
            if self.controller is None:
                self.schedule_election(self.rng.randint(50, 300))
            for node in nodes:
                if node.running:
                    self.events += node.process_some()
            if progress is not None and self.events >= next_report:
                progress(self.events)
                next_report += report_every

    def close(self) -> None:
        for node in self.nodes.values():
            node.running_at_close = node.running
            if node.running and node.journal is not None:
                node.journal.close()
                node.journal = None
                node.running = False


_EXEC = {
    C.WritePartitionStates: World._write_states,
    C.WriteTopicAssignment: World._write_topic,
    C.DeleteTopic: World._delete_topic,
    C.DeleteTopicDeletionRequests: World._delete_markers,
    C.WriteReassignmentPlan: World._write_plan,
    C.DeletePreferredElectionRequest: World._delete_preferred,
    C.SendLeaderAndIsr: World._send_lai,
    C.SendStopReplica: World._send_stop,
    C.ReplyControlledShutdown: World._reply_shutdown,
    C.ScheduleTimer: World._timer,
    C.CancelTimer: World._cancel_timer,
    C.WatchPartitionStates: World._watch,
    C.ReadPartitionStates: World._reread,
    C.UnwatchPartitionStates: World._unwatch,
    C.Resign: World._resign,
}
