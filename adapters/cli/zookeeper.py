"""`kctl zookeeper`: a real ZooKeeper server (or an ensemble of them) from the jars inside the
pyspark wheel, in the foreground (adapters/zookeeper/server.py, ensemble.py)."""
from __future__ import annotations

import errno
import socket

from adapters.cli.errors import CommandFailure, UsageError
from adapters.zookeeper.ensemble import serve_ensemble_forever
from adapters.zookeeper.server import serve_forever

DEFAULT_ZOOKEEPER_DATA_DIR = "./zookeeper-data"


def add_zookeeper_command(sub) -> None:
    p = sub.add_parser("zookeeper", help="run a real ZooKeeper server in the foreground (embedded)",
                       description="A real ZooKeeper 3.9 server (the jars inside the pyspark wheel, run with "
                                   "this machine's Java 17+) on 127.0.0.1, in the foreground; SIGTERM or "
                                   "Ctrl-C stops it. Prints its connect string once it serves.")
    p.add_argument("--port", type=int, default=2181, help="client port on 127.0.0.1 (default 2181; 0: any free port)")
    p.add_argument("--data-dir", default=DEFAULT_ZOOKEEPER_DATA_DIR,
                   help=f"snapshots, transaction logs and the server's own logs; kept between runs "
                        f"(default {DEFAULT_ZOOKEEPER_DATA_DIR}, relative to the current directory)")
    p.add_argument("--ensemble", type=int, default=None, metavar="N",
                   help="run N servers of one ensemble (data dirs DATA_DIR/zk-1..N, client ports PORT..PORT+N-1, "
                        "PORT 0: free ports) and print their connect string")
    p.set_defaults(func=cmd_zookeeper)


def cmd_zookeeper(args) -> int:
    if not 0 <= args.port < 65536:
        raise UsageError(f"--port must be a port number 0-65535, got {args.port}")
    if args.ensemble is not None:
        return _zookeeper_ensemble(args)
    if args.port:
        _check_port_free(args.port)
    return serve_forever(args.port, args.data_dir)


def _zookeeper_ensemble(args) -> int:
    if not 1 <= args.ensemble <= 9:
        raise UsageError(f"--ensemble must be a number of servers from 1 to 9, got {args.ensemble}")
    if args.port and args.port > 65536 - args.ensemble:
        raise UsageError(f"--port {args.port} leaves no room for {args.ensemble} consecutive client ports")
    if args.port:
        for port in range(args.port, args.port + args.ensemble):
            _check_port_free(port)
    return serve_ensemble_forever(args.ensemble, args.port, args.data_dir)


def _check_port_free(port: int) -> None:
    """Refuse a taken port with one line. Otherwise the JVM dies with a BindException stack
    trace, or, if the port's holder is another ZooKeeper, its `ruok` is mistaken for ours."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the JVM binds: TIME_WAIT is no obstacle
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CommandFailure(f"port {port} is in use") from None
            raise CommandFailure(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from None
