"""`kctl configs`: kafka-configs.sh --zookeeper for topics and brokers.

    kctl configs --entity-type topics --entity-name t --describe
    kctl configs --entity-type topics --entity-name t --alter --add-config k=v,k2=[a,b] --delete-config k3
    kctl configs --entity-type brokers --entity-default --alter --add-config unclean.leader.election.enable=true
    kctl configs --entity-type brokers --entity-name 1 --alter --add-config leader.replication.throttled.rate=1000000

Each alter writes `/config/<type>/<name>` (other keys kept) and then a `/config/changes`
notification (adapters/admin/configs.py, adapters/znodes/dynconfig.py), as Kafka's AdminZkClient does. Topic keys are checked
as Kafka's LogConfig checks them; broker keys are those this cluster follows while it runs
(`dynconfig.BROKER_DYNAMIC_KEYS`). Output lines are Kafka's: `Configs for topic 't' are k=v,...`
and `Completed Updating config for entity: topic 't'.`
"""
from __future__ import annotations

from adapters import admin
from adapters.admin import configs as admin_configs
from adapters.cli.common import run_with_zookeeper, zk_auth_flag, zookeeper_flag
from adapters.cli.errors import bad
from adapters.znodes import dynconfig as D


def add_configs_command(subparsers) -> None:
    """Register `kctl configs`."""
    p = subparsers.add_parser(
        "configs", help="describe and alter topic and broker configs (like kafka-configs.sh --zookeeper)",
        description="Describe and alter dynamic configs of topics and brokers in ZooKeeper, as kafka-configs.sh "
                    "--zookeeper does: each alter writes /config/<type>/<name> then a /config/changes notification.")
    zookeeper_flag(p)
    zk_auth_flag(p)
    p.add_argument("--entity-type", required=True, choices=D.ENTITY_TYPES, help="topics or brokers")
    who = p.add_mutually_exclusive_group()
    who.add_argument("--entity-name", help="the topic name or broker id")
    who.add_argument("--entity-default", action="store_true",
                     help="the cluster-wide broker default (/config/brokers/<default>)")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="print the overrides")
    action.add_argument("--alter", action="store_true", help="change the overrides")
    p.add_argument("--add-config", metavar="K=V,K2=V2",
                   help="configs to set; square brackets group values holding commas: k=[a,b]")
    p.add_argument("--delete-config", metavar="K,K2", action="append", help="config keys to remove")
    p.set_defaults(func=cmd_configs)


def _entity(entity_type: str, name: str) -> str:
    if name == D.DEFAULT_ENTITY:
        return f"default {entity_type}"
    return f"{'topic' if entity_type == D.TOPICS else entity_type} '{name}'"


def _entity_name(args) -> str | None:
    if args.entity_default:
        if args.entity_type != D.BROKERS:
            raise bad("--entity-default applies to brokers only")
        return D.DEFAULT_ENTITY
    name = args.entity_name
    if name is None:
        return None
    if args.entity_type == D.BROKERS and not (name.isascii() and name.isdigit() and int(name) <= 2**31 - 1):
        raise bad(f"The entity name for brokers must be a valid integer broker id, but it is: {name}")
    if args.entity_type == D.TOPICS:
        try:
            admin.validate_topic_name(name)
        except admin.AdminError as exc:
            raise bad(str(exc)) from None
    return name


def cmd_configs(args) -> int:
    name = _entity_name(args)
    if args.describe:
        if args.add_config is not None or args.delete_config:
            raise bad("--add-config and --delete-config can't be used with --describe")
        return run_with_zookeeper(args, lambda zk: _describe(zk, args.entity_type, name))
    if name is None:
        raise bad("--entity-name or --entity-default must be specified with --alter" if args.entity_type == D.BROKERS
                   else "--entity-name must be specified with --alter of topics")
    if args.add_config is None and not args.delete_config:
        raise bad("At least one of --add-config or --delete-config must be specified with --alter")
    try:
        add = D.parse_add_config(args.add_config) if args.add_config is not None else {}
        delete = [k.strip() for item in args.delete_config or () for k in item.split(",") if k.strip()]
        add, delete = admin_configs.validated(args.entity_type, add, delete)
    except (ValueError, admin.AdminError) as exc:
        raise bad(str(exc)) from None

    async def alter(zk) -> int:
        await admin_configs.alter_config(zk, args.entity_type, name, add, delete)
        print(f"Completed Updating config for entity: {_entity(args.entity_type, name)}.")
        return 0

    return run_with_zookeeper(args, alter)


async def _describe(zk, entity_type: str, name: str | None) -> int:
    names = [name] if name is not None else await D.entity_names(zk, entity_type)
    for n in names:
        config, _ = await D.read_config(zk, entity_type, n)
        shown = ",".join(f"{k}={v}" for k, v in sorted(config.items()))
        print(f"Configs for {_entity(entity_type, n)} are {shown}")
    return 0
