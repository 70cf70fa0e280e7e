"""A ZooKeeper ensemble on loopback, as production runs it: three or five servers, one quorum.

Each member is an `EmbeddedZooKeeper` (adapters/zookeeper/server.py) run as `QuorumPeerMain`
from the same pyspark jars, with its own data dir (`<base>/zk-<id>`, holding `myid`), its own
client port and its own peer (quorum) and election ports:

    ensemble = ZooKeeperEnsemble(base_dir, size=3).start()
    ensemble.connect_string        # "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
    ensemble.leader()              # the member whose `srvr` says "Mode: leader"
    ensemble.member_with_session(session_id)   # the member holding a client's connection (`cons`)
    ensemble.members[0].kill()     # SIGKILL one member; .start() brings it back (same dir, ports)
    ensemble.stop()

A member serves only while it is part of a quorum, so `start()` launches every JVM first and
then waits for all of them to serve; a single member restarted into a running quorum can use
its own `start()`, which waits until it has synced with the leader. `launch()` starts a member
without waiting (restoring quorum after two of three were down needs both JVMs up first).
"""
from __future__ import annotations

import concurrent.futures
import os
import re
import sys
import time
from pathlib import Path

from adapters.zookeeper.server import (
    EmbeddedZooKeeper,
    EmbeddedZooKeeperError,
    four_letter_word,
    free_loopback_port,
    serve_in_foreground,
)

QUORUM_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

_SESSION_ID = re.compile(r"sid=0x([0-9a-fA-F]+)")

_LAUNCHER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="zookeeper-launcher")


class EnsembleMember(EmbeddedZooKeeper):
    """One server of an ensemble: `server_id` is its `myid`; `peers` maps every member's id
    to its (peer port, election port, client port), this member's included."""

    main_class = QUORUM_MAIN_CLASS

    def __init__(self, data_dir: str | os.PathLike, server_id: int, peers: dict[int, tuple[int, int, int]],
                 tick_time_ms: int = 500, max_session_timeout_ms: int = 60000):
        super().__init__(data_dir, port=peers[server_id][2], tick_time_ms=tick_time_ms,
                         max_session_timeout_ms=max_session_timeout_ms)
        self.server_id = server_id
        self.peers = dict(peers)

    def launch(self) -> None:
        """Forked from one thread that lives as long as the process: the JVM asks for SIGTERM
        when its parent *thread* ends (PR_SET_PDEATHSIG), and a member restarted from a
        short-lived worker (`asyncio.to_thread`, whose executor ends with its event loop) would
        die with that thread."""
        _LAUNCHER.submit(super().launch).result()

    def _extra_config(self) -> list[str]:
        (self.data_dir / "myid").write_text(f"{self.server_id}\n")
        return [
            "initLimit=10",  # ticks a follower may take to connect and sync to the leader
            "syncLimit=5",  # ticks a follower may lag before the leader drops it
            "standaloneEnabled=false",
            "reconfigEnabled=false",
            *(f"server.{sid}={self.host}:{peer}:{election}" for sid, (peer, election, _) in sorted(self.peers.items())),
        ]

    def srvr(self) -> dict[str, str]:
        """The `srvr` answer as a dict ("Mode", "Zxid", ...); empty while not serving."""
        try:
            text = four_letter_word(self.host, self.port, "srvr", timeout=1.0)
        except OSError:
            return {}
        out = {}
        for line in text.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                out[key.strip()] = value.strip()
        return out

    def mode(self) -> str | None:
        """"leader", "follower", or None while it is down or not part of a quorum."""
        return self.srvr().get("Mode")

    def zxid(self) -> int | None:
        value = self.srvr().get("Zxid")
        return int(value, 16) if value else None

    def session_ids(self) -> set[int]:
        """The sessions whose client is connected to this member now (`cons`)."""
        try:
            text = four_letter_word(self.host, self.port, "cons", timeout=1.0)
        except OSError:
            return set()
        return {int(match, 16) for match in _SESSION_ID.findall(text)}

    def __repr__(self) -> str:
        state = "paused" if self._paused else ("running" if self.is_running() else "stopped")
        return f"<EnsembleMember {self.server_id} {self.connect_string} {state}>"


class ZooKeeperEnsemble:
    """`size` members on 127.0.0.1. `client_port` > 0 gives them consecutive client ports from
    it (2181, 2182, ...); otherwise every port is a free one picked once and kept across
    restarts."""

    def __init__(self, base_dir: str | os.PathLike, size: int = 3, client_port: int = 0,
                 tick_time_ms: int = 500, max_session_timeout_ms: int = 60000):
        if size < 1:
            raise ValueError(f"an ensemble needs at least one server, got {size}")
        self.base_dir = Path(base_dir).resolve()
        self.size = size
        self.client_port = client_port
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.started_once = False
        self.members = self._members()

    def _members(self) -> list[EnsembleMember]:
        peers = {}
        for sid in range(1, self.size + 1):
            client = self.client_port + sid - 1 if self.client_port else free_loopback_port()
            peers[sid] = (free_loopback_port(), free_loopback_port(), client)
        return [EnsembleMember(self.base_dir / f"zk-{sid}", sid, peers, self.tick_time_ms, self.max_session_timeout_ms)
                for sid in sorted(peers)]

    @property
    def connect_string(self) -> str:
        return ",".join(member.connect_string for member in self.members)

    @property
    def quorum(self) -> int:
        return len(self.members) // 2 + 1

    def member(self, server_id: int) -> EnsembleMember:
        return self.members[server_id - 1]

    def start(self, timeout: float = 60.0) -> "ZooKeeperEnsemble":
        """Launch every member that is not running, then wait until all of them serve.

        Free ports are picked before the JVMs bind them, and on a busy machine another process
        (an outgoing connection's ephemeral port) can take one meanwhile: the first start then
        tries again, up to three times, with fresh ports for every member (chosen ports, from
        `client_port`, are kept: a taken one is the operator's to fix)."""
        for attempt in range(3):
            for member in self.members:
                member.launch()
            try:
                self.wait_serving(self.members, timeout)
            except EmbeddedZooKeeperError as error:
                taken = "Address already in use" in str(error)
                if self.started_once or not taken or attempt == 2:
                    raise
                self.stop()
                self.members = self._members()
                continue
            self.started_once = True
            return self
        raise AssertionError("unreachable")

    def wait_serving(self, members, timeout: float = 60.0) -> None:
        """Return once each of `members` answers `srvr` as leader or follower."""
        deadline = time.monotonic() + timeout
        waiting = list(members)
        while waiting:
            for member in list(waiting):
                if not member.is_running():
                    raise EmbeddedZooKeeperError(
                        f"ensemble member {member.server_id} (port {member.port}) exited\n{member._log_tails()}")
                if member.mode() in ("leader", "follower"):
                    waiting.remove(member)
            if waiting and time.monotonic() > deadline:
                tails = "\n".join(m._log_tails() for m in waiting)
                raise EmbeddedZooKeeperError(
                    f"ensemble members {[m.server_id for m in waiting]} did not serve within {timeout:.0f}s\n{tails}")
            if waiting:
                time.sleep(0.05)

    def wait_leader(self, timeout: float = 60.0, exclude: EnsembleMember | None = None) -> EnsembleMember:
        """Wait until a quorum serves under one leader (not `exclude`, a member just killed
        whose followers may not have noticed yet); return the leader."""
        deadline = time.monotonic() + timeout
        while True:
            modes = {m.server_id: m.mode() for m in self.members if m.is_running() and m is not exclude}
            leaders = [sid for sid, mode in modes.items() if mode == "leader"]
            serving = [sid for sid, mode in modes.items() if mode in ("leader", "follower")]
            if len(leaders) == 1 and len(serving) >= self.quorum:
                return self.member(leaders[0])
            if time.monotonic() > deadline:
                raise EmbeddedZooKeeperError(f"no quorum under one leader within {timeout:.0f}s: {modes}")
            time.sleep(0.05)

    def leader(self) -> EnsembleMember | None:
        for member in self.members:
            if member.is_running() and member.mode() == "leader":
                return member
        return None

    def member_with_session(self, session_id: int) -> EnsembleMember | None:
        for member in self.members:
            if member.is_running() and session_id in member.session_ids():
                return member
        return None

    def stop(self) -> None:
        for member in self.members:
            member.stop()

    def __enter__(self) -> "ZooKeeperEnsemble":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<ZooKeeperEnsemble {self.connect_string} base_dir={self.base_dir}>"


def serve_ensemble_forever(size: int, port: int = 2181, data_dir: str | os.PathLike | None = None) -> int:
    """`kctl zookeeper --ensemble N`: run N members in the foreground until SIGTERM/SIGINT.

    Prints one line, the connect string, once every member serves. Exit code 0 after a
    requested stop, 1 if the ensemble failed to start or every member died by itself (one
    member dying is what an ensemble is for: it is reported on stderr and the rest carry on)."""
    reported: set[int] = set()

    def all_died(ensemble: ZooKeeperEnsemble) -> str | None:
        for member in ensemble.members:
            if not member.is_running() and member.server_id not in reported:
                reported.add(member.server_id)
                print(f"ZooKeeper server {member.server_id} ({member.connect_string}) exited; "
                      f"see {member.log_file}", file=sys.stderr, flush=True)
        return "every ZooKeeper server of the ensemble exited" if len(reported) == size else None

    return serve_in_foreground(lambda data_dir: ZooKeeperEnsemble(data_dir, size=size, client_port=port),
                               data_dir, all_died)
