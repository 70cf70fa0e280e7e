"""Kafka's request handlers at a kctl broker (Kafka 2.4's `KafkaApis` for the served apis).

Who answers what, as in Kafka 2.4:

- ApiVersions and Metadata: any broker, from its own metadata cache (`adapters.kafka.metadata`).
- DescribeConfigs: any broker; topic configs from `/config/topics/<t>` (the topic must be in the
  cache), broker configs only for this broker (or the empty name: the cluster-wide default).
- AlterConfigs, IncrementalAlterConfigs: any broker, for the same resources; it writes the new
  overrides and the change notification, as `kctl configs --alter` does (what changes:
  `adapters.kafka.alter_configs`).
- CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders: only the active controller; any
  other broker answers NOT_CONTROLLER for each topic or partition (clients send them to the
  controller id of their Metadata and retry). They write the znodes Kafka's admin path writes
  (`adapters.admin`), or, for ElectLeaders, pass the election to the controller's loop, then
  wait, up to the request's timeout, until this broker's metadata cache shows the outcome
  (Kafka's DelayedCreatePartitions / DelayedDeleteTopics / DelayedElectLeader), else
  REQUEST_TIMED_OUT.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import Any, Awaitable, Callable

import attrs

from controller_core.assignment import assign_replicas_to_brokers, expand_partitions
from controller_core.values import TopicPartition

from adapters import admin as A
from adapters.admin.topics import read_one_topic
from adapters.control import requests as Q
from adapters.znodes import codec as zkdata, dynconfig as D, paths as zkpaths
from adapters.control.framing import Frame
from adapters.zookeeper.session import NoNode, ZkError, ZkSession
from adapters.kafka import alter_configs as AC
from adapters.kafka import codec
from adapters.kafka import configs as CF
from adapters.kafka import metadata as M
from adapters.kafka import protocol as K
import re

log = logging.getLogger("kctl.kafka")

POLL_S = 0.02
"""How often a waiting admin request looks at the metadata cache again."""

FIRST_METADATA_WAIT_MS = 5000
"""How long a Metadata request waits for the broker's first UpdateMetadata. Kafka answers at
once with no brokers and no controller, but a node that has just started can take seconds to
hear from the controller, and librdkafka does not ask again for a controller it was told is
unknown before its request times out (a minute)."""


@attrs.define
class BrokerServices:
    """What the handlers need from the node they run in.

    `zk()` is the node's current ZooKeeper session; `is_controller()` whether this node is the
    active controller; `controller_request(frame)` hands a control-channel request (ElectLeaders)
    to this node's controller; `static_config` the node's Kafka-named settings."""

    broker_id: int
    broker: Any  # adapters.broker.broker.Broker: its metadata cache
    zk: Callable[[], ZkSession | None]
    is_controller: Callable[[], bool]
    controller_request: Callable[[Frame], Awaitable[dict]]
    static_config: dict = attrs.field(factory=dict)


class KafkaApis:
    def __init__(self, services: BrokerServices):
        self.s = services
        self._cluster_id: str | None = None
        self._grouped: tuple[int, dict] | None = None  # (cache generation, partitions by topic)
        self._all_topics: tuple[tuple, bytes] | None = None  # ((version, generation, cluster id), encoded body)
        self._topic_encodings = M.TopicEncodings()  # each topic's encoded entry, until it changes
        self.requests: Counter[str] = Counter()
        # by method name, not bound methods: a table of bound methods on the instance is a
        # reference cycle that kept a dropped node's broker for the cyclic collector (issue 16)
        self._handlers = {
            K.API_API_VERSIONS: "_api_versions",
            K.API_METADATA: "_metadata",
            K.API_CREATE_TOPICS: "_create_topics",
            K.API_DELETE_TOPICS: "_delete_topics",
            K.API_CREATE_PARTITIONS: "_create_partitions",
            K.API_DESCRIBE_CONFIGS: "_describe_configs",
            K.API_ELECT_LEADERS: "_elect_leaders",
            K.API_ALTER_CONFIGS: "_alter_configs",
            K.API_INCREMENTAL_ALTER_CONFIGS: "_incremental_alter_configs",
        }

    async def handle(self, request: K.Request) -> dict | bytes:
        """The response body of a served request (or its encoding)."""
        self.requests[K.SERVED[request.api_key][0]] += 1
        return await getattr(self, self._handlers[request.api_key])(request)

    # -- helpers -----------------------------------------------------------------------------------

    def _snapshot(self) -> M.CacheSnapshot:
        return M.snapshot(self.s.broker)

    def _zk(self) -> ZkSession:
        zk = self.s.zk()
        if zk is None:
            raise ZkError("no ZooKeeper session")
        return zk

    async def cluster_id(self) -> str | None:
        """`/cluster/id`, read once (Kafka's broker reads it at startup)."""
        if self._cluster_id is None:
            try:
                data, _ = await self._zk().get(zkpaths.CLUSTER_ID)
                self._cluster_id = zkdata.decode_cluster_id(data)
            except (ZkError, NoNode, zkdata.ZnodeFormatError) as err:
                log.warning("broker %d: cannot read the cluster id: %s", self.s.broker_id, err)
        return self._cluster_id

    async def _config(self, path: str) -> dict[str, str]:
        try:
            data, _ = await self._zk().get(path)
        except NoNode:
            return {}
        return zkdata.decode_topic_config(data)  # the same {"version":1,"config":{...}} shape

    async def _wait(self, done: Callable[[M.CacheSnapshot], bool], timeout_ms: int) -> bool:
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000.0
        while True:
            if done(M.snapshot(self.s.broker, copy=False)):  # polled: no copy of a 100,000-entry cache
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(POLL_S)

    # -- ApiVersions, Metadata ---------------------------------------------------------------------

    async def _api_versions(self, request: K.Request) -> dict:
        return K.api_versions_body()

    async def _metadata(self, request: K.Request) -> dict | bytes:
        """Clients poll Metadata for every topic: its encoding is kept until the next
        UpdateMetadata, and each topic's entry until an UpdateMetadata changes that topic
        (`metadata.TopicEncodings`: a 10,000-partition answer took 74-91 ms to build whole)."""
        if M.snapshot(self.s.broker, copy=False).controller_id < 0:
            await self._wait(lambda snap: snap.controller_id >= 0, FIRST_METADATA_WAIT_MS)
        cluster_id = await self.cluster_id()
        v = request.api_version
        gen = M.snapshot(self.s.broker, copy=False).generation
        key = (v, gen, cluster_id)
        every = M.all_topics(request.body, v)
        if every and gen is not None and self._all_topics is not None and self._all_topics[0] == key:
            return self._all_topics[1]
        snap = self._snapshot()
        if gen is None or self._grouped is None or self._grouped[0] != gen:
            self._grouped = (gen, snap.topics()) if gen is not None else None
        by_topic = self._grouped[1] if self._grouped is not None else None
        if not every or gen is None:
            return M.metadata_response(snap, request.body, v, cluster_id, by_topic)
        # every topic: each topic's entry as kept from the last answer unless it changed
        head = M.metadata_response(snap, request.body, v, cluster_id, {})
        entries = self._topic_encodings.encoded(
            by_topic, snap.brokers, v, lambda entry: codec.encode_element("MetadataResponse", v, "Topics", entry),
            snap.offline)
        data = codec.encode_spliced("MetadataResponse", v, head, "Topics", entries)
        self._all_topics = (key, data)
        return data

    # -- CreateTopics ------------------------------------------------------------------------------

    async def _create_topics(self, request: K.Request) -> dict:
        body = request.body
        v = request.api_version
        topics = body["Topics"]
        validate_only = body.get("validateOnly", False)
        timeout_ms = body["timeoutMs"]
        counts = Counter(t["Name"] for t in topics)
        results: dict[str, tuple[int, str | None, dict]] = {}
        for t in topics:
            name = t["Name"]
            if counts[name] > 1:
                results[name] = (K.INVALID_REQUEST, "Create topics request from client "
                                 f"`{request.client_id}` contains multiple entries for the following topics: {name}", t)
            elif not self.s.is_controller():
                results[name] = (K.NOT_CONTROLLER, None, t)
        created: dict[str, dict[int, list[int]]] = {}
        plans: dict[str, dict[int, list[int]]] = {}
        for t in topics:
            name = t["Name"]
            if name in results:
                continue
            try:
                assignment, configs = await self._plan_topic(t)
                plans[name] = assignment
                if not validate_only:
                    await A.create_topic(self._zk(), name, replica_assignment=assignment, configs=configs)
                    created[name] = assignment
                results[name] = (K.NONE, None, t)
            except _Refused as err:
                results[name] = (err.code, err.message, t)
            except A.AdminError as err:
                code = K.TOPIC_ALREADY_EXISTS if "already exists" in str(err) else \
                    K.INVALID_TOPIC_EXCEPTION if "collides" in str(err) else K.INVALID_REPLICA_ASSIGNMENT
                results[name] = (code, str(err), t)
            except Exception as err:  # ZooKeeper trouble: the client may retry
                log.warning("broker %d: CreateTopics %s failed: %r", self.s.broker_id, name, err)
                results[name] = (K.UNKNOWN_SERVER_ERROR, str(err), t)
        if created:
            def all_led(snap: M.CacheSnapshot) -> bool:
                return all(snap.partitions.get(TopicPartition(n, p)) is not None
                           and snap.partitions[TopicPartition(n, p)].leader >= 0
                           for n, a in created.items() for p in a)
            if timeout_ms <= 0 or not await self._wait(all_led, timeout_ms):
                for n in created:
                    results[n] = (K.REQUEST_TIMED_OUT, None, results[n][2])
        out = []
        for name in dict.fromkeys(t["Name"] for t in topics):
            code, message, t = results[name]
            entry: dict[str, Any] = {"Name": name, "ErrorCode": code, "ErrorMessage": message}
            if v >= 5:
                entry["NumPartitions"], entry["ReplicationFactor"], entry["Configs"] = -1, -1, None
                plan = plans.get(name)
                if code == K.NONE and plan is not None:
                    entry["NumPartitions"] = len(plan)
                    entry["ReplicationFactor"] = len(plan[0])
                    entry["Configs"] = [{"Name": c["Name"], "Value": c["Value"], "ReadOnly": False,
                                         "ConfigSource": c["ConfigSource"], "IsSensitive": False}
                                        for c in CF.topic_configs(_configs_of(t), {}, self.s.static_config)]
            out.append(entry)
        return {"ThrottleTimeMs": 0, "Topics": out}

    async def _plan_topic(self, t: dict) -> tuple[dict[int, list[int]], dict[str, str]]:
        """Kafka's checks of one CreatableTopic and its placement; raises _Refused."""
        name = t["Name"]
        try:
            A.validate_topic_name(name)
        except A.AdminError as err:
            raise _Refused(K.INVALID_TOPIC_EXCEPTION, str(err)) from None
        snap = self._snapshot()
        if any(tp.topic == name for tp in snap.partitions):
            raise _Refused(K.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        configs = _configs_of(t)
        try:
            configs = A.validate_topic_configs(configs)
        except A.AdminError as err:
            raise _Refused(K.INVALID_CONFIG, str(err)) from None
        partitions, rf = t["NumPartitions"], t["ReplicationFactor"]
        if t["Assignments"]:
            if partitions != -1 or rf != -1:
                raise _Refused(K.INVALID_REQUEST, "Both numPartitions or replicationFactor and replicasAssignments "
                                                  "were set. Both cannot be used at the same time.")
            assignment = {a["PartitionIndex"]: list(a["BrokerIds"]) for a in t["Assignments"]}
            if sorted(assignment) != list(range(len(assignment))):
                raise _Refused(K.INVALID_REPLICA_ASSIGNMENT,
                               "partitions should be a consecutive 0-based integer sequence")
            rfs = {len(r) for r in assignment.values()}
            if len(rfs) != 1 or 0 in rfs:
                raise _Refused(K.INVALID_REPLICA_ASSIGNMENT, "All partitions should have the same number of "
                                                             "replicas, and at least one")
            for p, r in assignment.items():
                if len(set(r)) != len(r):
                    raise _Refused(K.INVALID_REPLICA_ASSIGNMENT,
                                   f"Duplicate replica assignment found: {sorted(assignment.items())}")
            unknown = sorted({b for r in assignment.values() for b in r} - set(snap.brokers))
            if unknown:
                raise _Refused(K.INVALID_REPLICA_ASSIGNMENT,
                               f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
            return assignment, configs
        static = self.s.static_config
        if partitions == -1:
            partitions = int(static.get("num.partitions", CF.BROKER_DEFAULTS["num.partitions"]))
        if rf == -1:
            rf = int(static.get("default.replication.factor", CF.BROKER_DEFAULTS["default.replication.factor"]))
        if partitions <= 0:
            raise _Refused(K.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        if rf <= 0:
            raise _Refused(K.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
        if rf > len(snap.brokers):
            raise _Refused(K.INVALID_REPLICATION_FACTOR,
                           f"Replication factor: {rf} larger than available brokers: {len(snap.brokers)}.")
        placement = [(b, info.rack) for b, info in sorted(snap.brokers.items())]
        try:
            assignment = assign_replicas_to_brokers(placement, partitions, rf, seed=A.random_seed())
        except ValueError as err:  # racks on some brokers only: Kafka's AdminOperationException
            raise _Refused(K.UNKNOWN_SERVER_ERROR, str(err)) from None
        return {p: list(r) for p, r in assignment.items()}, configs

    # -- DeleteTopics ------------------------------------------------------------------------------

    async def _delete_topics(self, request: K.Request) -> dict:
        body = request.body
        names = list(dict.fromkeys(body["TopicNames"]))
        results: dict[str, int] = {}
        snap = self._snapshot()
        known = {tp.topic for tp in snap.partitions}
        enabled = str(self.s.static_config.get("delete.topic.enable", "true")).lower() == "true"
        marked = []
        for name in names:
            if not self.s.is_controller():
                results[name] = K.NOT_CONTROLLER
            elif not enabled:
                results[name] = K.TOPIC_DELETION_DISABLED if request.api_version >= 3 else K.INVALID_REQUEST
            elif name not in known:
                results[name] = K.UNKNOWN_TOPIC_OR_PARTITION
            else:
                try:
                    await A.delete_topics(self._zk(), _exact(name))
                    marked.append(name)
                    results[name] = K.NONE
                except A.AdminError:
                    results[name] = K.UNKNOWN_TOPIC_OR_PARTITION
                except Exception as err:
                    log.warning("broker %d: DeleteTopics %s failed: %r", self.s.broker_id, name, err)
                    results[name] = K.UNKNOWN_SERVER_ERROR
        if marked:
            def gone(s: M.CacheSnapshot) -> bool:
                present = {tp.topic for tp in s.partitions}
                return not any(n in present for n in marked)
            if not await self._wait(gone, body["TimeoutMs"]):
                present = {tp.topic for tp in self._snapshot().partitions}
                for n in marked:
                    if n in present:
                        results[n] = K.REQUEST_TIMED_OUT
        return {"ThrottleTimeMs": 0, "Responses": [{"Name": n, "ErrorCode": results[n]} for n in names]}

    # -- CreatePartitions --------------------------------------------------------------------------

    async def _create_partitions(self, request: K.Request) -> dict:
        body = request.body
        counts = Counter(t["Name"] for t in body["Topics"])
        results: dict[str, tuple[int, str | None]] = {}
        grown: dict[str, int] = {}
        for t in body["Topics"]:
            name = t["Name"]
            if counts[name] > 1:
                results[name] = (K.INVALID_REQUEST, "Duplicate topic in request.")
                continue
            if not self.s.is_controller():
                results[name] = (K.NOT_CONTROLLER, None)
                continue
            try:
                assignment = await self._plan_partitions(t)
                if not body["ValidateOnly"]:
                    await A.add_partitions(self._zk(), name, t["Count"], replica_assignment=assignment)
                    grown[name] = t["Count"]
                results[name] = (K.NONE, None)
            except _Refused as err:
                results[name] = (err.code, err.message)
            except A.AdminError as err:
                results[name] = (K.INVALID_REPLICA_ASSIGNMENT, str(err))
            except Exception as err:
                log.warning("broker %d: CreatePartitions %s failed: %r", self.s.broker_id, name, err)
                results[name] = (K.UNKNOWN_SERVER_ERROR, str(err))
        if grown:
            def led(snap: M.CacheSnapshot) -> bool:
                return all(snap.partitions.get(TopicPartition(n, p)) is not None
                           and snap.partitions[TopicPartition(n, p)].leader >= 0
                           for n, count in grown.items() for p in range(count))
            if not await self._wait(led, body["TimeoutMs"]):
                for n in grown:
                    results[n] = (K.REQUEST_TIMED_OUT, None)
        return {"ThrottleTimeMs": 0, "Results": [{"Name": n, "ErrorCode": c, "ErrorMessage": m}
                                                 for n, (c, m) in results.items()]}

    async def _plan_partitions(self, t: dict) -> dict[int, list[int]] | None:
        """Kafka 2.4's `AdminManager.createPartitions` checks; the full assignment to write
        (None: Kafka's placement continues the topic's)."""
        name, count = t["Name"], t["Count"]
        zk = self._zk()
        if await zk.exists(zkpaths.delete_topic(name)) is not None:
            raise _Refused(K.INVALID_TOPIC_EXCEPTION, "The topic is queued for deletion.")
        try:
            current, _ = await read_one_topic(zk, name)
        except A.AdminError:
            raise _Refused(K.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.") from None
        old = len(current)
        if count < old:
            raise _Refused(K.INVALID_PARTITIONS,
                           f"Topic currently has {old} partitions, which is higher than the requested {count}.")
        if count == old:
            raise _Refused(K.INVALID_PARTITIONS, f"Topic already has {old} partitions.")
        snap = self._snapshot()
        rf = len(current[0].replicas) if 0 in current else 0
        assignments = t["Assignments"]
        if assignments is None:
            placement = [(b, info.rack) for b, info in sorted(snap.brokers.items())]
            try:
                expand_partitions({p: ra.replicas for p, ra in current.items()}, placement, count, topic=name)
            except ValueError as err:
                raise _Refused(K.INVALID_REPLICATION_FACTOR, str(err)) from None
            return None
        groups = [list(a["BrokerIds"]) for a in assignments]
        if len(groups) != count - old:
            raise _Refused(K.INVALID_REPLICA_ASSIGNMENT, f"Increasing the number of partitions by {count - old} "
                                                         f"but {len(groups)} assignments provided.")
        unknown = sorted({b for g in groups for b in g} - set(snap.brokers))
        if unknown:
            raise _Refused(K.INVALID_REPLICA_ASSIGNMENT,
                           f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
        for i, g in enumerate(groups):
            if len(g) != rf:
                raise _Refused(K.INVALID_REPLICA_ASSIGNMENT, f"Inconsistent replication factor between partitions, "
                                                             f"partition 0 has {rf} while partition {old + i} has "
                                                             f"replication factor {len(g)}.")
            if len(set(g)) != len(g):
                raise _Refused(K.INVALID_REPLICA_ASSIGNMENT, f"Duplicate brokers not allowed in replica assignment: "
                                                             f"{', '.join(map(str, g))} for partition id {old + i}.")
        full = {p: list(ra.replicas) for p, ra in current.items()}
        full.update({old + i: g for i, g in enumerate(groups)})
        return full

    # -- DescribeConfigs ---------------------------------------------------------------------------

    async def _describe_configs(self, request: K.Request) -> dict:
        body = request.body
        include_synonyms = body.get("IncludeSynoyms", False)
        results = []
        for res in body["Resources"]:
            rtype, rname, keys = res["ResourceType"], res["ResourceName"], res["ConfigurationKeys"]
            entry = {"ErrorCode": K.NONE, "ErrorMessage": None, "ResourceType": rtype, "ResourceName": rname,
                     "Configs": []}
            try:
                configs = await self._configs_of(rtype, rname)
            except _Refused as err:
                entry["ErrorCode"], entry["ErrorMessage"] = err.code, err.message
            except Exception as err:
                log.warning("broker %d: DescribeConfigs %s failed: %r", self.s.broker_id, rname, err)
                entry["ErrorCode"], entry["ErrorMessage"] = K.UNKNOWN_SERVER_ERROR, str(err)
            else:
                if keys is not None:
                    configs = [c for c in configs if c["Name"] in set(keys)]
                if not include_synonyms:
                    configs = [{**c, "Synonyms": []} for c in configs]
                entry["Configs"] = configs
            results.append(entry)
        return {"ThrottleTimeMs": 0, "Results": results}

    async def _configs_of(self, rtype: int, rname: str) -> list[dict]:
        static = {k: str(v) for k, v in self.s.static_config.items()}
        default = await self._config(f"{zkpaths.CONFIG}/brokers/<default>")
        if rtype == CF.TOPIC:
            try:
                A.validate_topic_name(rname)
            except A.AdminError as err:
                raise _Refused(K.INVALID_TOPIC_EXCEPTION, str(err)) from None
            if not any(tp.topic == rname for tp in self._snapshot().partitions):
                raise _Refused(K.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {rname} does not exist.")
            return CF.topic_configs(await self._config(zkpaths.config_topic(rname)), default, static)
        if rtype == CF.BROKER:
            if rname == "":
                return CF.default_broker_configs(default)
            if rname != str(self.s.broker_id):
                raise _Refused(K.INVALID_REQUEST, f"Unexpected broker id, expected {self.s.broker_id} or empty "
                                                  f"string, but received {rname}")
            return CF.broker_configs(await self._config(f"{zkpaths.CONFIG}/brokers/{rname}"), default, static)
        raise _Refused(K.INVALID_REQUEST, f"Unsupported resource type {rtype}")

    # -- AlterConfigs, IncrementalAlterConfigs -----------------------------------------------------

    async def _incremental_alter_configs(self, request: K.Request) -> dict:
        body = request.body
        results = []
        for res in body["Resources"]:
            rtype, rname = res["ResourceType"], res["ResourceName"]
            ops = [(c["Name"], c["ConfigOperation"], c["Value"]) for c in res["Configs"]]
            results.append(await self._alter_one("IncrementalAlterConfigs", rtype, rname, body["ValidateOnly"],
                                                 lambda current: AC.incremental(rtype, rname, current, ops)))
        return {"ThrottleTimeMs": 0, "Responses": results}

    async def _alter_configs(self, request: K.Request) -> dict:
        body = request.body
        results = []
        for res in body["Resources"]:
            rtype, rname = res["ResourceType"], res["ResourceName"]
            entries = [(c["Name"], c["Value"]) for c in res["Configs"]]
            results.append(await self._alter_one("AlterConfigs", rtype, rname, body["ValidateOnly"],
                                                 lambda _current: AC.replacement(rtype, rname, entries)))
        return {"ThrottleTimeMs": 0, "Responses": results}

    async def _alter_one(self, api: str, rtype: int, rname: str, validate_only: bool, change) -> dict:
        """One resource of an alter request: `change` its overrides (AC.Refused says why not) and
        write them with their change notification unless `validate_only`."""
        entry = {"ErrorCode": K.NONE, "ErrorMessage": None, "ResourceType": rtype, "ResourceName": rname}
        try:
            entity_type, name = AC.entity(rtype, rname, self.s.broker_id)
            zk = self._zk()
            if entity_type == D.TOPICS:
                try:
                    A.validate_topic_name(name)
                except A.AdminError as err:
                    raise AC.Refused(K.INVALID_TOPIC_EXCEPTION, str(err)) from None
                if await zk.exists(zkpaths.topic(name)) is None:
                    raise AC.Refused(K.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist.")
            new, written = await D.update_config(zk, entity_type, name, change, write=not validate_only)
            if written:
                log.info("broker %d: %s: /config/%s/%s is now %s", self.s.broker_id, api, entity_type, name, new)
        except AC.Refused as err:
            entry["ErrorCode"], entry["ErrorMessage"] = err.code, err.message
            log.info("broker %d: %s of %s refused: %s", self.s.broker_id, api, AC.describe(rtype, rname), err.message)
        except Exception as err:  # ZooKeeper unavailable, an unreadable znode, a write that kept conflicting
            log.warning("broker %d: %s of %s failed: %r", self.s.broker_id, api, AC.describe(rtype, rname), err)
            entry["ErrorCode"], entry["ErrorMessage"] = K.UNKNOWN_SERVER_ERROR, str(err)
        return entry

    # -- ElectLeaders ------------------------------------------------------------------------------

    async def _elect_leaders(self, request: K.Request) -> dict:
        body = request.body
        preferred = request.api_version == 0 or body["ElectionType"] == 0
        if request.api_version >= 1 and body["ElectionType"] not in (0, 1):
            return {"ThrottleTimeMs": 0, "ErrorCode": K.INVALID_REQUEST, "ReplicaElectionResults": []}
        asked = body["TopicPartitions"]
        tps = None if asked is None else [TopicPartition(t["Topic"], p) for t in asked for p in t["PartitionId"]]
        results: dict[TopicPartition, tuple[int, str | None]] = {}
        if not self.s.is_controller():
            for tp in tps or ():
                results[tp] = (K.NOT_CONTROLLER, None)
            return _election_body(results)
        before = self._snapshot().partitions
        frame = Frame(Q.ELECT_LEADERS, 0, False, {"election_type": "preferred" if preferred else "unclean",
                                                  "partitions": None if tps is None else Q.tp_list(tps)})
        answer = await self.s.controller_request(frame)
        if answer.get("error"):
            code = K.ERROR_NAMES.get(str(answer["error"]), K.UNKNOWN_SERVER_ERROR)
            for tp in tps or ():
                results[tp] = (code, answer.get("message"))
            return _election_body(results)
        elected = []
        for topic, partition, error in answer.get("results") or []:
            tp = TopicPartition(topic, partition)
            if not error:
                results[tp] = (K.NONE, None)
                elected.append(tp)
                continue
            kind, _, message = str(error).partition(": ")
            if kind == "ELECTION_FAILED":
                code = K.PREFERRED_LEADER_NOT_AVAILABLE if preferred else K.ELIGIBLE_LEADERS_NOT_AVAILABLE
            else:
                code = K.ERROR_NAMES.get(kind, K.UNKNOWN_SERVER_ERROR)
            results[tp] = (code, message or None)
        if elected:
            def seen(snap: M.CacheSnapshot) -> bool:
                return all(tp in snap.partitions and (tp not in before
                                                      or snap.partitions[tp].leader_epoch > before[tp].leader_epoch)
                           for tp in elected)
            if not await self._wait(seen, body["TimeoutMs"]):
                for tp in elected:
                    results[tp] = (K.REQUEST_TIMED_OUT, None)
        return _election_body(results)


class _Refused(Exception):
    def __init__(self, code: int, message: str | None):
        super().__init__(message)
        self.code = code
        self.message = message


def _configs_of(t: dict) -> dict[str, str]:
    return {c["Name"]: c["Value"] for c in t["Configs"] if c["Value"] is not None}


def _exact(name: str) -> str:
    """`admin.delete_topics` matches a regular expression: this one matches `name` only."""

    return re.escape(name)


def _election_body(results: dict[TopicPartition, tuple[int, str | None]]) -> dict:
    by_topic: dict[str, list[dict]] = {}
    for tp, (code, message) in sorted(results.items()):
        by_topic.setdefault(tp.topic, []).append({"PartitionId": tp.partition, "ErrorCode": code,
                                                  "ErrorMessage": message})
    return {"ThrottleTimeMs": 0, "ErrorCode": K.NONE,
            "ReplicaElectionResults": [{"Topic": t, "PartitionResult": ps} for t, ps in by_topic.items()]}
