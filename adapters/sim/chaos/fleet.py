"""What the chaos soak runs and breaks: ZooKeeper, one proxy per node, the node processes.

Each node is a real `kctl node` process (adapters/sim/cluster.py) whose `--zookeeper` is its own
`TcpProxy` in front of the one ZooKeeper server, so a network fault hits one node only. The
harness itself (admin work, checks, session expiry) talks to ZooKeeper directly.

The low-level faults are here, each one awaitable and none blocking the event loop (the proxies
run on the same loop: a blocked loop would partition every node at once):
`kill`, `start_node`, `pause`/`resume`, `terminate` (SIGTERM: controlled shutdown), `expire`
(ZooKeeper's own session expiry, through a second handle on the node's session),
`restart_zookeeper`, the proxies' `set_delay`/`cut`/`blackhole`/`heal`, and `fail_log_dir`
(a disk failure) / `replace_log_dirs` (the disk replaced). `heal_all()` undoes everything at once.

Every node has `LOG_DIRS` log dirs (`--log-dirs`, under `<out>/data/node-N/`), so that one of
them can fail while the broker keeps serving the other.

Ensemble mode (`zookeeper_servers` > 1): an embedded ensemble (adapters/zookeeper/ensemble.py)
instead of one server; each node then has one proxy per member (a `ProxyGroup`, faulted as one
link) and a connect string listing them all, and the members themselves are killed, paused and
restarted (`kill_member`, `pause_member`/`resume_member`, `restart_member`).

A node that exits when the harness did not ask it to is recorded in `unexpected_exits` (with
the tail of its log) and started again, as a supervisor would.
"""
from __future__ import annotations

import asyncio
import base64
import json
import logging
import shutil
import signal
import time
import uuid
from collections import Counter
from pathlib import Path

from adapters.sim.cluster import LocalCluster, NodeProcess
from adapters.sim.tcpproxy import TcpProxy
from adapters.zookeeper.session import ZkSession, force_expire, parse_connect_string
from adapters.zookeeper.ensemble import EnsembleMember, ZooKeeperEnsemble
from adapters.zookeeper.server import EmbeddedZooKeeper
from adapters.sim.chaos.config import ChaosConfig

log = logging.getLogger("kctl.chaos")

LOG_DIRS = 2  # per node
LOG_DIR_FAILURES = ("deleted", "replaced by a file")


class _ProxiedNodes(LocalCluster):
    """`LocalCluster` whose node N connects through its own proxy (`connects[N]`) and keeps its
    replicas in the log dirs `log_dirs[N]`."""

    def __init__(self, connects: dict[int, str], log_dirs: dict[int, list[Path]], base: Path, settings: dict):
        super().__init__("unused", base, settings=settings)
        self.connects = connects
        self.log_dirs = log_dirs

    def node_args(self, broker_id: int, rack: str | None = None, settings: dict | None = None) -> list[str]:
        dirs = {"log.dirs": ",".join(str(d) for d in self.log_dirs[broker_id])}
        args = super().node_args(broker_id, rack, {**dirs, **(settings or {})})
        args[args.index("--zookeeper") + 1] = self.connects[broker_id]
        return args


class ProxyGroup:
    """One node's link to an ensemble: a proxy per member, delayed, cut and healed together."""

    def __init__(self, proxies: list[TcpProxy]):
        self.proxies = proxies

    @property
    def address(self) -> str:
        return ",".join(p.address for p in self.proxies)

    @property
    def counts(self) -> Counter:
        total: Counter = Counter()
        for p in self.proxies:
            total.update(p.counts)
        return total

    def set_delay(self, seconds: float) -> None:
        for p in self.proxies:
            p.set_delay(seconds)

    def cut(self) -> None:
        for p in self.proxies:
            p.cut()

    def blackhole(self) -> None:
        for p in self.proxies:
            p.blackhole()

    def heal(self) -> None:
        for p in self.proxies:
            p.heal()

    async def close(self) -> None:
        for p in self.proxies:
            await p.close()


class Fleet:
    def __init__(self, config: ChaosConfig, base: Path):
        self.config = config
        self.base = base
        self.ids = list(range(1, config.nodes + 1))
        self.zk_server: EmbeddedZooKeeper | None = None
        self.ensemble: ZooKeeperEnsemble | None = None
        self.members_down: set[int] = set()  # ensemble members killed, stopped or paused right now
        self._member_tasks: set[asyncio.Future] = set()
        self.zk_host = ""
        self.zk_port = 0
        self.chroot = ""
        self.proxies: dict[int, TcpProxy] = {}
        self.nodes: _ProxiedNodes | None = None
        self.on_purpose: set[int] = set()  # nodes stopped or killed by the harness right now
        self.paused: set[int] = set()
        self.unexpected_exits: list[dict] = []
        self.log_dirs = {b: [base / "data" / f"node-{b}" / f"d{k}" for k in range(LOG_DIRS)] for b in self.ids}
        self.failed_dirs: dict[int, set[Path]] = {}  # node -> its log dirs broken and not replaced yet
        self.zookeeper_down = False
        self._watcher: asyncio.Task | None = None
        self._zk_restart: asyncio.Future | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def embedded(self) -> bool:
        return self.config.zookeeper is None

    @property
    def hosts(self) -> str:
        """Every ZooKeeper server, as a connect string without chroot."""
        if self.ensemble is not None:
            return self.ensemble.connect_string
        return f"{self.zk_host}:{self.zk_port}"

    @property
    def direct(self) -> str:
        """The harness's own connect string (no proxy)."""
        return f"{self.hosts}{self.chroot}"

    @property
    def journals(self) -> Path:
        return self.base / "nodes"

    async def start(self) -> None:
        if self.config.zookeeper is None and self.config.zookeeper_servers > 1:
            self.ensemble = ZooKeeperEnsemble(self.base / "zookeeper", size=self.config.zookeeper_servers)
            await asyncio.to_thread(self.ensemble.start, 120)
            self.chroot = "/chaos"
        elif self.config.zookeeper is None:
            self.zk_server = EmbeddedZooKeeper(self.base / "zookeeper")
            await asyncio.to_thread(self.zk_server.start)
            self.zk_host, self.zk_port = self.zk_server.host, self.zk_server.port
            self.chroot = "/chaos"
        else:
            hosts, chroot = parse_connect_string(self.config.zookeeper)
            host, _, port = hosts.split(",")[0].rpartition(":")
            self.zk_host, self.zk_port = host.strip("[]"), int(port or 2181)
            # a fresh chroot under the given one: a shared ensemble keeps other clusters apart
            self.chroot = f"{chroot or ''}/kctl-chaos-{self.config.seed}-{uuid.uuid4().hex[:8]}"
        for b in self.ids:
            if self.ensemble is not None:
                self.proxies[b] = ProxyGroup([await TcpProxy(m.host, m.port, name=f"proxy-{b}-zk{m.server_id}").start()
                                              for m in self.ensemble.members])
            else:
                self.proxies[b] = await TcpProxy(self.zk_host, self.zk_port, name=f"proxy-{b}").start()
        connects = {b: f"{p.address}{self.chroot}" for b, p in self.proxies.items()}
        self.nodes = _ProxiedNodes(connects, self.log_dirs, self.journals, self.config.node_settings())
        for b in self.ids:
            self.nodes.start_node(b)
        self._watcher = asyncio.create_task(self._watch_exits(), name="chaos-exit-watcher")

    async def admin_session(self) -> ZkSession:
        # longer than a ZooKeeper restart (3-4 s here), so the harness keeps its session; not much
        # longer: a reconnect attempt caught by the restarting server waits up to this long
        return await ZkSession.connect(self.direct, session_timeout_ms=10000)

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
            self._watcher = None
        if self.nodes is not None:
            self.on_purpose.update(self.ids)
            await asyncio.to_thread(self.nodes.stop_all)
            for node in self.nodes.nodes.values():
                _close_log(node)
        for proxy in self.proxies.values():
            await proxy.close()
        if self.zk_server is not None:
            await asyncio.to_thread(self.zk_server.stop)
        if self.ensemble is not None:
            await asyncio.gather(*self._member_tasks, return_exceptions=True)
            await asyncio.to_thread(self.ensemble.stop)

    async def stop_nodes(self) -> None:
        """SIGKILL every node (the journals are complete up to their last fsync)."""
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
            self._watcher = None
        self.on_purpose.update(self.ids)
        await asyncio.to_thread(self.nodes.stop_all)

    # -- node faults ---------------------------------------------------------------------------

    def process(self, b: int) -> NodeProcess:
        return self.nodes.nodes[b]

    def running(self, b: int) -> bool:
        return self.process(b).running()

    async def kill(self, b: int) -> None:
        self.on_purpose.add(b)
        node = self.process(b)
        node.signal(signal.SIGKILL)
        await _exited(node, 10)
        self.paused.discard(b)

    async def start_node(self, b: int) -> None:
        """(Re)start node b; a no-op if it runs."""
        if self.running(b):
            return
        _close_log(self.process(b))
        self.nodes.start_node(b)
        self.on_purpose.discard(b)

    def pause(self, b: int) -> None:
        self.process(b).signal(signal.SIGSTOP)
        self.paused.add(b)

    def resume(self, b: int) -> None:
        self.process(b).signal(signal.SIGCONT)
        self.paused.discard(b)

    async def terminate(self, b: int, timeout: float) -> int | None:
        """SIGTERM (a controlled shutdown); the exit code, or None if it did not exit in time
        (then it is killed)."""
        self.on_purpose.add(b)
        node = self.process(b)
        node.signal(signal.SIGCONT)
        self.paused.discard(b)
        node.signal(signal.SIGTERM)
        code = await _exited(node, timeout)
        if code is None:
            node.signal(signal.SIGKILL)
            await _exited(node, 10)
        return code

    def session_of(self, b: int) -> tuple[int, bytes] | None:
        """The ZooKeeper session node b last registered with (from its zk-session.json)."""
        path = self.journals / f"node-{b}" / "zk-session.json"
        try:
            saved = json.loads(path.read_text())
            return int(saved["session_id"]), base64.b64decode(saved["password"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    async def expire(self, b: int) -> int | None:
        """Expire node b's session on the server; the session id, or None if none is known."""
        session = self.session_of(b)
        if session is None:
            return None
        await force_expire(self.hosts, *session, timeout=15)
        return session[0]

    async def restart_zookeeper(self) -> float:
        """Stop and start the embedded server on the same port and data dir; seconds it was down.
        The restart runs in a thread that a cancelled caller cannot stop: `heal_all` waits for it."""
        started = time.monotonic()
        self.zookeeper_down = True
        self._zk_restart = asyncio.ensure_future(asyncio.to_thread(self.zk_server.restart, 60))
        try:
            await asyncio.shield(self._zk_restart)
        finally:
            if self._zk_restart.done():
                self.zookeeper_down = False
        return time.monotonic() - started

    # -- log dirs -----------------------------------------------------------------------------------

    def replicas_in(self, d: Path) -> list[tuple[str, int]]:
        """(topic, partition) of every replica directory in log dir `d` (`<topic>-<partition>`)."""
        out = []
        try:
            entries = sorted(p.name for p in d.iterdir() if p.is_dir())
        except OSError:
            return out
        for name in entries:
            topic, sep, p = name.rpartition("-")
            if sep and topic and p.isdigit():
                out.append((topic, int(p)))
        return out

    def fail_log_dir(self, b: int, index: int, how: str) -> Path:
        """Break node b's log dir `index` as a failed disk looks to a broker: the directory
        deleted, or replaced by a plain file (every write into it fails). Returns the dir."""
        d = self.log_dirs[b][index]
        self.failed_dirs.setdefault(b, set()).add(d)
        shutil.rmtree(d, ignore_errors=True)
        if how == "replaced by a file":
            d.write_text("this log dir failed (kctl chaos)\n")
        return d

    def replace_log_dirs(self, b: int) -> list[Path]:
        """Node b's broken log dirs replaced by fresh empty ones (a new disk; call it while the
        node is stopped: a running broker keeps a failed dir offline until it restarts)."""
        replaced = sorted(self.failed_dirs.pop(b, ()))
        for d in replaced:
            if d.is_dir():
                shutil.rmtree(d)
            elif d.exists():
                d.unlink()
            d.mkdir(parents=True)
        return replaced

    async def replace_disk(self, b: int, timeout: float = 60) -> int | None:
        """What an operator does about a failed disk: a controlled shutdown of the node (SIGTERM),
        the failed dirs replaced by empty ones, the node started again. The exit code of the
        shutdown (None: it did not exit within `timeout` and was killed)."""
        code = await self.terminate(b, timeout) if self.running(b) else None
        self.replace_log_dirs(b)
        await self.start_node(b)
        return code

    # -- ensemble member faults ------------------------------------------------------------------
    # Each runs the blocking part in a thread that a cancelled caller cannot stop (`heal_all`
    # waits for them), as `restart_zookeeper` does.

    async def _member_op(self, fn, *args):
        task = asyncio.ensure_future(asyncio.to_thread(fn, *args))
        self._member_tasks.add(task)
        task.add_done_callback(self._member_tasks.discard)
        return await asyncio.shield(task)

    async def kill_member(self, member: EnsembleMember) -> None:
        self.members_down.add(member.server_id)
        await self._member_op(member.kill)

    async def start_member(self, member: EnsembleMember) -> float:
        """Start a stopped member; seconds until it serves again (synced with the leader)."""
        started = time.monotonic()
        await self._member_op(member.start, 120)
        self.members_down.discard(member.server_id)
        return time.monotonic() - started

    async def restart_member(self, member: EnsembleMember) -> float:
        """SIGTERM and start again; seconds from the stop until it serves."""
        started = time.monotonic()
        self.members_down.add(member.server_id)
        await self._member_op(member.stop)
        await self.start_member(member)
        return time.monotonic() - started

    async def pause_member(self, member: EnsembleMember) -> None:
        self.members_down.add(member.server_id)
        await self._member_op(member.pause)

    async def resume_member(self, member: EnsembleMember) -> None:
        await self._member_op(member.resume)
        self.members_down.discard(member.server_id)

    # -- healing ---------------------------------------------------------------------------------

    async def heal_all(self) -> None:
        """Proxies open, ZooKeeper up, every node running and resumed."""
        for proxy in self.proxies.values():
            proxy.heal()
        if self._zk_restart is not None:
            await asyncio.gather(self._zk_restart, return_exceptions=True)
            self.zookeeper_down = False
        if self.zk_server is not None and not self.zk_server.is_running():
            await asyncio.to_thread(self.zk_server.start, 60)
        if self.ensemble is not None:
            await asyncio.gather(*self._member_tasks, return_exceptions=True)
            for member in self.ensemble.members:
                await asyncio.to_thread(member.resume)
            await asyncio.to_thread(self.ensemble.start, 120)
            self.members_down.clear()
        for b in self.ids:
            if b in self.paused:
                self.resume(b)
            if b in self.failed_dirs:
                await self.replace_disk(b)
            if b in self.on_purpose and self.running(b):
                # still on its way out (a controlled shutdown): let it finish, then restart it
                node = self.process(b)
                if await _exited(node, 60) is None:
                    node.signal(signal.SIGKILL)
                    await _exited(node, 10)
            if not self.running(b):
                await self.start_node(b)

    # -- supervision -----------------------------------------------------------------------------

    async def _watch_exits(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            for b in self.ids:
                node = self.process(b)
                if b in self.on_purpose or node.running() or node.proc is None:
                    continue
                code = node.proc.returncode
                tail = "\n".join(node.log_text().splitlines()[-15:])
                log.error("node %d exited by itself with code %s:\n%s", b, code, tail)
                self.unexpected_exits.append({"node": b, "code": code, "at": time.time(), "log_tail": tail})
                await asyncio.sleep(1.0)
                if not self.running(b) and b not in self.on_purpose:
                    await self.start_node(b)


async def _exited(node: NodeProcess, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = node.proc.poll() if node.proc is not None else 0
        if code is not None:
            return code
        await asyncio.sleep(0.05)
    return None


def _close_log(node: NodeProcess) -> None:
    handle = getattr(node, "log", None)
    if handle is not None and not handle.closed:
        handle.close()
