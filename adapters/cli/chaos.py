"""`kctl chaos`: the seeded chaos soak (adapters/sim/chaos/), wired into the `kctl` parser by
`add_chaos_command(subparsers)`.

Exit 0 when every check passes, 1 when one fails (the failing checks are named) or the cluster
could not be set up; bad flags raise `UsageError` (one line, exit 2).
"""
from __future__ import annotations

import asyncio
import os
from pathlib import Path

from adapters.cli.common import check_connect_string
from adapters.cli.errors import CommandFailure, UsageError
from adapters.sim.chaos import ChaosConfig, run_chaos
from adapters.sim.chaos.run import SetupFailed
from adapters.zookeeper.server import EmbeddedZooKeeperError


def add_chaos_command(subparsers) -> None:
    p = subparsers.add_parser(
        "chaos", help="the chaos soak: a cluster of real nodes under random faults and admin work, then checks",
        description="Run a cluster of real `kctl node` processes on ZooKeeper (embedded unless --zookeeper), each "
                    "behind its own TCP proxy, inject seeded random faults (SIGKILL, SIGSTOP past the session "
                    "timeout, session expiry, ZooKeeper restarts, delayed and cut links, failed log dirs) while "
                    "performing admin work (topics, reassignments with and without a throttle and their verify, "
                    "preferred elections, controlled shutdowns, dynamic config changes), then heal, wait for the cluster to settle and check it, its brokers' metadata and the "
                    "replay of every journal. Writes --out/chaos.json. Exit 0 when every check passes, 1 otherwise.")
    p.add_argument("--duration", type=float, required=True, help="seconds of faults and admin work")
    p.add_argument("--seed", type=int, default=None, help="seed of every random choice (default: a random one, printed)")
    p.add_argument("--partitions", type=int, default=1000, help="partitions created before the chaos (default 1000)")
    p.add_argument("--nodes", type=int, default=5, help="kctl node processes (default 5)")
    p.add_argument("--out", default=None,
                   help="directory for chaos.json, the journals and logs (must be new or empty; default: a "
                        "temporary directory, removed when the run passes)")
    p.add_argument("--zookeeper", default=None,
                   help="use this ZooKeeper (host:port[/chroot]) instead of starting one; no ZooKeeper restarts then")
    p.add_argument("--zookeeper-servers", type=int, default=1, metavar="N",
                   help="embedded ZooKeeper: 1 server (default) or an ensemble of N (3 or 5), whose members are "
                        "killed, paused and restarted among the faults")
    p.add_argument("--replay", choices=("spark", "local", "none"), default="spark",
                   help="how to audit the journals: kctl replay on Spark (default), replay.local in this process, "
                        "or not at all")
    p.add_argument("--settle-timeout", type=float, default=180.0,
                   help="seconds the healed cluster gets to pass the checks (default 180)")
    p.add_argument("--session-timeout-ms", type=int, default=3000,
                   help="the nodes' zookeeper.session.timeout.ms (default 3000)")
    p.add_argument("--fault-interval", type=float, default=4.0, help="mean seconds between two faults (default 4)")
    p.add_argument("--admin-interval", type=float, default=1.5,
                   help="mean seconds between two admin operations (default 1.5)")
    p.add_argument("--max-impaired", type=int, default=2, help="nodes under a fault at the same time, at most (default 2)")
    p.set_defaults(func=cmd_chaos)


def _config(args):
    def positive(name: str, value: float, upper: float) -> None:
        if not value > 0 or value > upper:
            raise UsageError(f"--{name} must be above 0 and at most {upper:g}, got {value:g}")

    positive("duration", args.duration, 7 * 24 * 3600)
    positive("settle-timeout", args.settle_timeout, 24 * 3600)
    positive("fault-interval", args.fault_interval, 3600)
    positive("admin-interval", args.admin_interval, 3600)
    if not 1 <= args.partitions <= 100_000:
        raise UsageError(f"--partitions must be 1-100000, got {args.partitions}")
    if not 1 <= args.nodes <= 20:
        raise UsageError(f"--nodes must be 1-20, got {args.nodes}")
    if not 0 <= args.max_impaired < args.nodes:
        raise UsageError(f"--max-impaired must be 0-{args.nodes - 1} (below --nodes), got {args.max_impaired}")
    if not 1000 <= args.session_timeout_ms <= 60000:
        raise UsageError(f"--session-timeout-ms must be 1000-60000 (what the ZooKeeper server grants), "
                         f"got {args.session_timeout_ms}")
    if args.zookeeper is not None:
        check_connect_string(args.zookeeper)
    if not 1 <= args.zookeeper_servers <= 9:
        raise UsageError(f"--zookeeper-servers must be 1-9, got {args.zookeeper_servers}")
    if args.zookeeper_servers > 1 and args.zookeeper is not None:
        raise UsageError("--zookeeper-servers starts an embedded ensemble: it cannot go with --zookeeper")
    out = None
    if args.out is not None:
        out = Path(args.out)
        if out.exists() and not out.is_dir():
            raise UsageError(f"--out {args.out} exists and is not a directory")
        if out.is_dir() and any(out.iterdir()):
            raise UsageError(f"--out {args.out} is not empty (a run's journals must not mix with another's)")
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "big") >> 1
    return ChaosConfig(duration=args.duration, seed=seed, partitions=args.partitions, nodes=args.nodes, out=out,
                       zookeeper=args.zookeeper, zookeeper_servers=args.zookeeper_servers, replay=args.replay, settle_timeout=args.settle_timeout,
                       session_timeout_ms=args.session_timeout_ms, fault_interval=args.fault_interval,
                       admin_interval=args.admin_interval, max_impaired=args.max_impaired)


def cmd_chaos(args) -> int:
    config = _config(args)
    try:
        report = asyncio.run(run_chaos(config))
    except (SetupFailed, EmbeddedZooKeeperError) as exc:
        raise CommandFailure(str(exc)) from None
    return 0 if report["passed"] else 1
