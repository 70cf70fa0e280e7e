"""`kctl`: the one console script. Flags follow Kafka's own tools.

Every command answers `--help`, exits 0 on success, and on bad input prints one line
`error: ...` on stderr and exits 2 (no traceback). A valid command that cannot be carried out
(ZooKeeper unreachable, a damaged journal, a port in use) also prints one `error: ...` line and
exits 1. `--zookeeper` defaults to `$KCTL_ZOOKEEPER`, then 127.0.0.1:2181.
"""
from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Callable

from adapters.cli.admin import add_admin_commands
from adapters.cli.chaos import add_chaos_command
from adapters.cli.configs import add_configs_command
from adapters.cli.demo import add_demo_command
from adapters.cli.errors import CommandFailure, Parser, UsageError, one_line
from adapters.cli.node import add_node_command
from adapters.cli.replay import add_replay_command
from adapters.cli.zookeeper import add_zookeeper_command
from benchmarks.failover import add_command as add_bench_command


def _version() -> str:
    """The installed distribution's version (pyproject.toml), without importing anything heavy."""
    try:
        return version("kctl")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def build_parser() -> Parser:
    parser = Parser(prog="kctl", description="A Kafka 2.4-style cluster controller on ZooKeeper.")
    parser.add_argument("--version", action="version", version=f"kctl {_version()}",
                        help="print kctl's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    add_zookeeper_command(sub)
    add_node_command(sub)
    add_admin_commands(sub)
    add_configs_command(sub)
    add_demo_command(sub, main)
    add_replay_command(sub)
    add_chaos_command(sub)
    add_bench_command(sub, UsageError)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            raise UsageError("a command is required (see kctl --help)")
        func: Callable = args.func
        return func(args)
    except UsageError as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    except CommandFailure as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
