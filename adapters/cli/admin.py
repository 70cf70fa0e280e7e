"""`kctl topics`, `kctl reassign-partitions`, `kctl leader-election` and `kctl cluster`.

The flags are those of Kafka 2.4's kafka-topics.sh --zookeeper, kafka-reassign-partitions.sh
--zookeeper and kafka-leader-election.sh, and so are the outputs, so runbooks translate word for
word. The logic is in `adapters.admin`; this module parses, checks flag combinations, runs one
ZooKeeper session and prints.

Exit codes: 0 success; 2 bad input or a refused request, with one `error: ...` line on stderr
and nothing written; 1 a valid request that could not be carried out (ZooKeeper or the
controller unreachable, an election that failed).

ZooKeeper credentials: `--zk-auth USER:PASSWORD` (default `$KCTL_ZOOKEEPER_AUTH`, the variable
`kctl node` reads too) authenticates the tool's session with the digest scheme, and the znodes it
creates then get Kafka's secure ACL (all rights for that principal, read for everyone), as Kafka's
tools do whenever ZooKeeper security is configured. Against a cluster running with
`zookeeper.set.acl=true` the tools need the cluster's credentials to write anything; without
them ZooKeeper refuses the first write (NoAuth), nothing is written, and the tool says so.
"""
from __future__ import annotations

import json
import os

from controller_core.values import TopicPartition

from adapters import admin
from adapters.cli.common import run_with_zookeeper, zk_auth_flag, zookeeper_flag
from adapters.cli.errors import bad
from adapters.znodes import codec as zkdata



def add_admin_commands(subparsers) -> None:
    """Add the four admin commands to `kctl`'s subparsers."""

    # -- topics
    p = subparsers.add_parser(
        "topics", help="create, alter, delete, describe and list topics (like kafka-topics.sh --zookeeper)",
        description="Create, alter, delete, describe and list topics, as kafka-topics.sh --zookeeper does.")
    zookeeper_flag(p)
    zk_auth_flag(p)
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument("--create", action="store_true", help="create a new topic")
    actions.add_argument("--alter", action="store_true", help="add partitions to a topic, or change its configs")
    actions.add_argument("--delete", action="store_true", help="mark topics for deletion")
    actions.add_argument("--describe", action="store_true", help="list details of the given topics (default: all)")
    actions.add_argument("--list", action="store_true", help="list all topics")
    p.add_argument("--topic", help="the topic (a regular expression for --alter, --delete and --describe)")
    p.add_argument("--partitions", type=int, help="number of partitions (--create, or the new total for --alter)")
    p.add_argument("--replication-factor", type=int, help="replicas per partition (--create)")
    p.add_argument("--replica-assignment", metavar="B:B,B:B",
                   help="manual placement: partition i gets the i-th comma group of ':'-separated broker ids")
    p.add_argument("--config", action="append", metavar="NAME=VALUE", help="a topic config override (repeatable)")
    p.add_argument("--delete-config", action="append", metavar="NAME", help="remove a config override (--alter)")
    p.add_argument("--if-exists", action="store_true", help="with --alter, --delete, --describe: only if the topic exists")
    p.add_argument("--if-not-exists", action="store_true", help="with --create: only if the topic does not exist")
    p.add_argument("--disable-rack-aware", action="store_true", help="place replicas ignoring racks")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="with --describe: only partitions whose ISR is smaller than their replicas")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="with --describe: only partitions whose leader is not available")
    p.add_argument("--topics-with-overrides", action="store_true",
                   help="with --describe: only topics that have config overrides")
    p.add_argument("--under-min-isr-partitions", action="store_true",
                   help="with --describe: only partitions whose ISR is smaller than the topic's min.insync.replicas "
                        "(default 1), or that have no leader")
    p.add_argument("--at-min-isr-partitions", action="store_true",
                   help="with --describe: only partitions whose ISR size equals the topic's min.insync.replicas")
    p.add_argument("--exclude-internal", action="store_true",
                   help="with --describe and --list: leave out Kafka's internal topics (__consumer_offsets, "
                        "__transaction_state)")
    p.set_defaults(func=cmd_topics)

    # -- reassign-partitions
    p = subparsers.add_parser(
        "reassign-partitions", help="move partition replicas (like kafka-reassign-partitions.sh --zookeeper)",
        description="Generate, execute and verify partition reassignments, as kafka-reassign-partitions.sh "
                    "--zookeeper does.")
    zookeeper_flag(p)
    zk_auth_flag(p)
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument("--generate", action="store_true", help="propose an assignment of the topics over --broker-list")
    actions.add_argument("--execute", action="store_true", help="start the reassignment in --reassignment-json-file")
    actions.add_argument("--verify", action="store_true", help="report the progress of --reassignment-json-file")
    p.add_argument("--reassignment-json-file", metavar="FILE",
                   help='{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}')
    p.add_argument("--topics-to-move-json-file", metavar="FILE", help='{"version":1,"topics":[{"topic":"t"}]}')
    p.add_argument("--broker-list", metavar="1,2,3", help="with --generate: the brokers to place replicas on")
    p.add_argument("--disable-rack-aware", action="store_true", help="with --generate: ignore racks")
    p.add_argument("--throttle", type=int, metavar="BYTES_PER_S",
                   help="with --execute: throttle the replication of the moving replicas to this rate (bytes/s); "
                        "rerun while the reassignment runs to change the rate; --verify removes it once done")
    p.set_defaults(func=cmd_reassign_partitions)

    # -- leader-election
    p = subparsers.add_parser(
        "leader-election", help="elect preferred or unclean leaders (like kafka-leader-election.sh)",
        description="Ask the controller to elect leaders, as kafka-leader-election.sh does. The request goes to "
                    "the controller's control channel (shared secret from $KCTL_CONTROL_SECRET if set).")
    zookeeper_flag(p)
    zk_auth_flag(p)
    p.add_argument("--election-type", required=True, type=str.upper, choices=("PREFERRED", "UNCLEAN"),
                   help="PREFERRED: move leadership to the first replica; UNCLEAN: elect a leader outside "
                        "the ISR where no ISR member is alive")
    p.add_argument("--topic", help="the topic of --partition")
    p.add_argument("--partition", type=int, help="the partition of --topic")
    p.add_argument("--all-topic-partitions", action="store_true", help="every partition of every topic")
    p.add_argument("--path-to-json-file", metavar="FILE", help='{"partitions":[{"topic":"t","partition":0}]}')
    p.add_argument("--timeout-ms", type=int, default=30_000, help="how long to look for a controller (default 30000)")
    p.set_defaults(func=cmd_leader_election)

    # -- cluster
    p = subparsers.add_parser(
        "cluster", help="controller, live brokers and partition health counts",
        description="The controller and its epoch, the live brokers, and the partition, offline, under-replicated "
                    "and preferred-replica-imbalance counts.")
    zookeeper_flag(p)
    zk_auth_flag(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_cluster)


# -- running -----------------------------------------------------------------------------------


def _read_file(path: str, option: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise bad(f"cannot read {option} {path}: {exc.strerror}") from None
    if not data.strip():  # else the JSON reader, made for znodes, would say "the znode has no data"
        raise bad(f"{option} {path} is empty (expected a JSON document)")
    return data


def _given(args, *names: str) -> list[str]:
    out = []
    for name in names:
        value = getattr(args, name.replace("-", "_"))
        if value not in (None, False, []):
            out.append(f"--{name}")
    return out


def _not_with(args, action: str, *names: str) -> None:
    extra = _given(args, *names)
    if extra:
        raise bad(f"option {extra[0]} can't be used with --{action}")


# -- topics ------------------------------------------------------------------------------------


def cmd_topics(args) -> int:
    if args.create:
        return _topics_create(args)
    if args.alter:
        return _topics_alter(args)
    if args.delete:
        return _topics_delete(args)
    if args.describe:
        return _topics_describe(args)
    return _topics_list(args)


def _require_topic(args, action: str) -> str:
    if args.topic is None:
        raise bad(f"--{action} requires --topic")
    return args.topic


def _topics_create(args) -> int:
    topic = _require_topic(args, "create")
    _not_with(args, "create", "delete-config", "if-exists", "under-replicated-partitions", "unavailable-partitions",
              "topics-with-overrides", "under-min-isr-partitions", "at-min-isr-partitions", "exclude-internal")
    try:
        admin.validate_topic_name(topic)
        configs = admin.parse_topic_configs(args.config)
        admin.validate_topic_configs(configs)
        assignment = None
        if args.replica_assignment is not None:
            _not_with(args, "replica-assignment", "partitions", "replication-factor")
            assignment = admin.parse_replica_assignment(args.replica_assignment)
        elif args.partitions is None or args.replication_factor is None:
            raise bad("--create requires --partitions and --replication-factor, or --replica-assignment")
    except admin.AdminError as exc:
        raise bad(str(exc)) from None

    async def work(zk) -> int:
        created = await admin.create_topic(
            zk, topic, partitions=args.partitions, replication_factor=args.replication_factor,
            replica_assignment=assignment, configs=configs, if_not_exists=args.if_not_exists,
            disable_rack_aware=args.disable_rack_aware)
        if created is not None:
            if "." in topic or "_" in topic:
                print("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') "
                      "could collide. To avoid issues it is best to use either, but not both.")
            print(f"Created topic {topic}.")
        return 0

    return run_with_zookeeper(args, work)


def _topics_alter(args) -> int:
    topic = _require_topic(args, "alter")
    _not_with(args, "alter", "replication-factor", "if-not-exists", "under-replicated-partitions",
              "unavailable-partitions", "topics-with-overrides", "under-min-isr-partitions", "at-min-isr-partitions",
              "exclude-internal")
    if args.partitions is None and not args.config and not args.delete_config:
        raise bad("--alter requires --partitions, --config or --delete-config")
    if args.replica_assignment is not None and args.partitions is None:
        raise bad("--replica-assignment with --alter requires --partitions")
    try:
        configs = admin.parse_topic_configs(args.config)
        admin.validate_topic_configs(configs)
        assignment = (admin.parse_replica_assignment(args.replica_assignment)
                      if args.replica_assignment is not None else None)
    except admin.AdminError as exc:
        raise bad(str(exc)) from None

    async def work(zk) -> int:
        topics = [t for t, _ in await admin.list_topics(zk)]
        matching = sorted(t for t in topics if admin.topic_pattern(topic).fullmatch(t))
        if not matching:
            if args.if_exists:
                return 0
            raise admin.AdminError(f"Topic '{topic}' does not exist as expected")
        if args.partitions is not None and args.partitions <= 0:
            raise admin.AdminError("The number of partitions must be larger than 0.")
        for t in matching:
            if configs or args.delete_config:
                await admin.alter_topic_configs(zk, t, configs, args.delete_config or ())
                print(f"Updated config for topic {t}.")
            if args.partitions is not None:
                print("WARNING: If partitions are increased for a topic that has a key, the partition logic or "
                      "ordering of the messages will be affected")
                await admin.add_partitions(zk, t, args.partitions, replica_assignment=assignment,
                                           disable_rack_aware=args.disable_rack_aware)
                print("Adding partitions succeeded!")
        return 0

    return run_with_zookeeper(args, work)


def _topics_delete(args) -> int:
    topic = _require_topic(args, "delete")
    _not_with(args, "delete", "partitions", "replication-factor", "replica-assignment", "config", "delete-config",
              "if-not-exists", "under-replicated-partitions", "unavailable-partitions", "topics-with-overrides", "under-min-isr-partitions",
              "at-min-isr-partitions", "exclude-internal")

    async def work(zk) -> int:
        for t, already in await admin.delete_topics(zk, topic, if_exists=args.if_exists):
            if already:
                print(f"Topic {t} is already marked for deletion.")
            else:
                print(f"Topic {t} is marked for deletion.")
                print("Note: This will have no impact if delete.topic.enable is not set to true.")
        return 0

    return run_with_zookeeper(args, work)


_REPORTS = ("under-replicated-partitions", "unavailable-partitions", "under-min-isr-partitions",
            "at-min-isr-partitions")


def _topics_describe(args) -> int:
    _not_with(args, "describe", "partitions", "replication-factor", "replica-assignment", "config", "delete-config",
              "if-not-exists")
    for report in _REPORTS[2:]:
        if getattr(args, report.replace("-", "_")):
            # Kafka's rule: one replication report at a time, and not with --topics-with-overrides
            _not_with(args, report, *(r for r in _REPORTS if r != report), "topics-with-overrides")

    async def work(zk) -> int:
        for line in await admin.describe_topics(
                zk, args.topic, if_exists=args.if_exists, under_replicated=args.under_replicated_partitions,
                unavailable=args.unavailable_partitions, with_overrides=args.topics_with_overrides,
                under_min_isr=args.under_min_isr_partitions, at_min_isr=args.at_min_isr_partitions,
                exclude_internal=args.exclude_internal):
            print(line)
        return 0

    return run_with_zookeeper(args, work)


def _topics_list(args) -> int:
    _not_with(args, "list", "partitions", "replication-factor", "replica-assignment", "config",
              "delete-config", "if-exists", "if-not-exists", "under-replicated-partitions",
              "unavailable-partitions", "topics-with-overrides", "under-min-isr-partitions", "at-min-isr-partitions")

    async def work(zk) -> int:
        topics = await admin.list_topics(zk)
        if args.exclude_internal:
            topics = [(t, marked) for t, marked in topics if t not in admin.INTERNAL_TOPICS]
        if args.topic is not None:
            pattern = admin.topic_pattern(args.topic)
            topics = [(t, marked) for t, marked in topics if pattern.fullmatch(t)]
        for t, marked in topics:
            print(f"{t} - marked for deletion" if marked else t)
        return 0

    return run_with_zookeeper(args, work)


# -- reassign-partitions -----------------------------------------------------------------------


def _reassignment_json(entries) -> str:
    return zkdata.encode_reassignment_file([(tp, list(r)) for tp, r in entries]).decode()


def _reassignment_file(args, action: str):
    if not args.reassignment_json_file:
        raise bad(f"If --{action} option is used, command must include --reassignment-json-file that was output "
                   "during the --generate option")
    data = _read_file(args.reassignment_json_file, "--reassignment-json-file")
    try:
        entries = zkdata.decode_reassignment_file(data)
    except zkdata.ZnodeFormatError as exc:
        raise bad(f"{args.reassignment_json_file}: {exc}") from None
    chosen = _chosen_log_dirs(data)
    if chosen:
        raise bad(f"{args.reassignment_json_file}: log_dirs must be \"any\": moving a replica to a chosen log "
                   f"directory is not supported ({chosen[0]})")
    return entries


def _chosen_log_dirs(data: bytes) -> list[str]:
    """`topic-partition: dir` for each `log_dirs` entry other than "any" (the file already
    decoded, so its shape is known to be right)."""
    out = []
    for entry in json.loads(data).get("partitions") or []:
        for d in entry.get("log_dirs") or []:
            if d != zkdata.ANY_LOG_DIR:
                out.append(f"{entry['topic']}-{entry['partition']}: {d}")
    return out


def cmd_reassign_partitions(args) -> int:
    if args.generate:
        _not_with(args, "generate", "reassignment-json-file", "throttle")
        if not args.topics_to_move_json_file or not args.broker_list:
            raise bad("If --generate option is used, command must include both --topics-to-move-json-file and "
                       "--broker-list options")
        data = _read_file(args.topics_to_move_json_file, "--topics-to-move-json-file")
        try:
            topics = zkdata.decode_topics_to_move_file(data)
            brokers = admin.parse_broker_list(args.broker_list)
        except zkdata.ZnodeFormatError as exc:
            raise bad(f"{args.topics_to_move_json_file}: {exc}") from None
        except admin.AdminError as exc:
            raise bad(str(exc)) from None

        async def generate(zk) -> int:
            current, proposed = await admin.generate_reassignment(zk, topics, brokers,
                                                                  disable_rack_aware=args.disable_rack_aware)
            print(f"Current partition replica assignment\n{_reassignment_json(current)}\n")
            print(f"Proposed partition reassignment configuration\n{_reassignment_json(proposed)}")
            return 0

        return run_with_zookeeper(args, generate)

    _not_with(args, "execute" if args.execute else "verify", "topics-to-move-json-file", "broker-list",
              "disable-rack-aware")
    if args.verify:
        _not_with(args, "verify", "throttle")
    if args.throttle is not None and args.throttle <= 0:
        raise bad(f"--throttle must be a positive number of bytes per second, got {args.throttle}")
    entries = _reassignment_file(args, "execute" if args.execute else "verify")
    if args.execute:
        async def execute(zk) -> int:
            if args.throttle is not None and await admin.reassignment_running(zk):
                # Kafka's executeAssignment: a running reassignment only gets its rate changed
                print("There is an existing assignment running.")
                rate = await admin.change_reassignment_throttle(zk, entries, args.throttle)
                print(f"The inter-broker throttle limit was set to {rate} B/s")
                return 0
            def validated(current) -> None:
                print(f"Current partition replica assignment\n\n{_reassignment_json(current)}\n\n"
                      "Save this to use as the --reassignment-json-file option during rollback")
                if args.throttle is not None:
                    print("Warning: You must run Verify periodically, until the reassignment completes, to ensure the "
                          "throttle is removed. You can also alter the throttle by rerunning the Execute command "
                          "passing a new value.")

            await admin.execute_reassignment(zk, entries, throttle=args.throttle, on_validated=validated)
            if args.throttle is not None:
                print(f"The inter-broker throttle limit was set to {args.throttle} B/s")
            print("Successfully started reassignment of partitions.")
            return 0

        return run_with_zookeeper(args, execute)

    async def verify(zk) -> int:
        print("Status of partition reassignment: ")
        statuses = await admin.verify_reassignment(zk, entries)
        for tp, status in statuses:
            if status == admin.REASSIGNMENT_COMPLETED:
                print(f"Reassignment of partition {tp} completed successfully")
            elif status == admin.REASSIGNMENT_IN_PROGRESS:
                print(f"Reassignment of partition {tp} is still in progress")
            else:
                print(f"Reassignment of partition {tp} failed")
        if all(status == admin.REASSIGNMENT_COMPLETED for _, status in statuses):
            if await admin.remove_reassignment_throttle(zk, [tp.topic for tp, _ in entries]):
                print("Throttle was removed.")
        return 0

    return run_with_zookeeper(args, verify)


# -- leader-election ---------------------------------------------------------------------------


def cmd_leader_election(args) -> int:
    chosen = _given(args, "topic", "all-topic-partitions", "path-to-json-file")
    if args.partition is not None and args.topic is None:
        raise bad("Option partition is only allowed if topic is used")
    if len(chosen) != 1:
        raise bad("One and only one of the following options is required: all-topic-partitions, topic, "
                   "path-to-json-file")
    if args.topic is not None and args.partition is None:
        raise bad("Missing required option(s): partition")
    if args.timeout_ms <= 0:
        raise bad("--timeout-ms must be positive")
    partitions: list[TopicPartition] | None
    if args.topic is not None:
        if args.partition < 0:
            raise bad(f"--partition must be a non-negative integer, got {args.partition}")
        partitions = [TopicPartition(args.topic, args.partition)]
    elif args.path_to_json_file:
        data = _read_file(args.path_to_json_file, "--path-to-json-file")
        try:
            partitions = list(zkdata.decode_leader_election_file(data))
        except zkdata.ZnodeFormatError as exc:
            raise bad(f"{args.path_to_json_file}: {exc}") from None
        if not partitions:
            raise bad(f"{args.path_to_json_file}: the file lists no partitions")
    else:
        partitions = None
    election = args.election_type
    secret = os.environ.get("KCTL_CONTROL_SECRET") or None

    async def work(zk) -> int:
        results = await admin.elect_leaders(zk, election, partitions, secret=secret, timeout=args.timeout_ms / 1000)
        succeeded = [tp for tp, error in results if error is None]
        noop = [tp for tp, error in results if error is not None and error.startswith(admin.ELECTION_NOT_NEEDED)]
        failed = [(tp, error) for tp, error in results
                  if error is not None and not error.startswith(admin.ELECTION_NOT_NEEDED)]
        if succeeded:
            print(f"Successfully completed leader election ({election}) for partitions "
                  + ", ".join(map(str, succeeded)))
        if noop:
            print("Valid replica already elected for partitions " + ", ".join(map(str, noop)))
        for tp, error in failed:
            print(f"Error completing leader election ({election}) for partition: {tp}: {error}")
        if failed:
            raise admin.ToolFailure(f"{len(failed)} replica(s) could not be elected")
        return 0

    return run_with_zookeeper(args, work)


# -- cluster -----------------------------------------------------------------------------------


def format_summary(s: dict) -> str:
    controller = "none" if s["controller"] is None else str(s["controller"])
    brokers = ",".join(map(str, s["live_brokers"])) or "none"
    deleting = ", ".join(s["topics_marked_for_deletion"]) or "none"
    return "\n".join([
        f"Controller: {controller} (epoch {s['controller_epoch']})",
        f"Live brokers: {brokers} ({len(s['live_brokers'])})",
        f"Topics: {s['topics']}",
        f"Partitions: {s['partitions']}",
        f"Offline partitions: {s['offline_partitions']}",
        f"Under-replicated partitions: {s['under_replicated_partitions']}",
        f"Preferred replica imbalance: {s['preferred_replica_imbalance']}",
        f"Partitions being reassigned: {s['partitions_being_reassigned']}",
        f"Topics marked for deletion: {deleting}",
    ])


def cmd_cluster(args) -> int:
    async def work(zk) -> int:
        summary = await admin.cluster_summary(zk)
        print(json.dumps(summary, sort_keys=True) if args.json else format_summary(summary))
        return 0

    return run_with_zookeeper(args, work)

