"""A real ZooKeeper server, run from the jars shipped inside the installed pyspark wheel.

The pyspark wheel carries `zookeeper-3.9.x.jar` and everything the standalone server needs
(jute, slf4j + log4j2, netty, dropwizard metrics, snappy, commons-io), so with a JVM on the
machine `kctl zookeeper` and the test suite get a genuine ZooKeeper without a system package.

The server runs as a child `java` process (`ZooKeeperServerMain <zoo.cfg>`) in its own process
group, so a Ctrl-C in the terminal reaches only the Python side, which then stops the JVM
cleanly. On Linux the child also asks the kernel for SIGTERM when its parent dies, so a killed
test run does not leave JVMs behind.

Everything the server writes goes to the data dir: `zoo.cfg`, `log4j2.properties`,
`zookeeper.log` (WARN and above), `java.out` (the JVM's own stdout/stderr) and the snapshots and
transaction logs under `version-2/`.
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"

# Jar name prefixes the standalone server needs, as found in pyspark 4.x's jars dir. Matching by
# prefix keeps us independent of the exact versions the wheel pins.
_CLASSPATH_PREFIXES = (
    "zookeeper-",  # server + client (zookeeper-3.9.x.jar) and zookeeper-jute-3.9.x.jar
    "slf4j-api-",
    "log4j-slf4j2-impl-",
    "log4j-api-",
    "log4j-core-",
    "netty-buffer-",
    "netty-codec-",  # netty-codec-4.x and netty-codec-base-4.x (ZK's netty bits are optional)
    "netty-common-",
    "netty-handler-",
    "netty-resolver-",
    "netty-transport-",
    "metrics-core-",
    "snappy-java-",
    "commons-io-",
    "commons-cli-",
    "audience-annotations-",
)
_CLASSPATH_EXCLUDE = ("netty-codec-http", "netty-codec-dns", "netty-codec-socks", "netty-handler-proxy",
                      "netty-resolver-dns", "netty-transport-native-kqueue", "netty-transport-classes-kqueue")

JVM_FLAGS = (
    "-Xms32m",
    "-Xmx512m",
    "-Xss512k",
    "-XX:+UseSerialGC",
    "-XX:CICompilerCount=2",  # two cores here: keep the JIT from competing with the client
    "-Djava.net.preferIPv4Stack=true",
    "-Djava.awt.headless=true",
    "-Dzookeeper.jmx.log4j.disable=true",
)

_PR_SET_PDEATHSIG = 1


class EmbeddedZooKeeperError(RuntimeError):
    """The server could not be started (the message carries the tail of its logs)."""


def pyspark_jars_dir() -> Path:
    """The `jars` directory of the installed pyspark package (found without importing pyspark)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedZooKeeperError("pyspark is not installed: it carries the ZooKeeper jars we run")
    for location in spec.submodule_search_locations:
        jars = Path(location) / "jars"
        if any(jars.glob("zookeeper-[0-9]*.jar")):
            return jars
    raise EmbeddedZooKeeperError("the installed pyspark has no jars/zookeeper-*.jar")


def zookeeper_classpath(jars_dir: Path | None = None) -> str:
    """The minimal classpath for `ZooKeeperServerMain`, built from pyspark's jars."""
    jars_dir = jars_dir or pyspark_jars_dir()
    picked = sorted(
        str(jar)
        for jar in jars_dir.glob("*.jar")
        if jar.name.startswith(_CLASSPATH_PREFIXES) and not jar.name.startswith(_CLASSPATH_EXCLUDE)
    )
    return os.pathsep.join(picked)


def java_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise EmbeddedZooKeeperError("no `java` on PATH (and JAVA_HOME is not set): install a JRE 11+")
    return found


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def four_letter_word(host: str, port: int, word: str, timeout: float = 2.0) -> str:
    """Send a ZooKeeper four-letter command and return the whole answer."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode("ascii"))
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Runs in a child between fork and exec: the child gets `sig` when its parent dies (Linux's
    PR_SET_PDEATHSIG), so nothing outlives a killed test, demo or benchmark."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except Exception:  # not Linux: best effort only
        pass


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class EmbeddedZooKeeper:
    """One standalone ZooKeeper server on 127.0.0.1, owned by this object.

    `port=0` picks a free loopback port once; `restart()` keeps it, and the data dir, so clients
    can reconnect and sessions survive a restart that is shorter than their timeout.
    """

    host = "127.0.0.1"
    main_class = MAIN_CLASS  # an ensemble member runs QuorumPeerMain (adapters/zookeeper/ensemble.py)

    def __init__(self, data_dir: str | os.PathLike, port: int = 0, tick_time_ms: int = 500,
                 max_session_timeout_ms: int = 60000):
        self.data_dir = Path(data_dir).resolve()
        self.port = port or free_loopback_port()
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self._proc: subprocess.Popen | None = None
        self._paused = False
        self._java_out = None

    # -- files -----------------------------------------------------------------------------

    @property
    def log_file(self) -> Path:
        return self.data_dir / "zookeeper.log"

    @property
    def java_out_file(self) -> Path:
        return self.data_dir / "java.out"

    @property
    def config_file(self) -> Path:
        return self.data_dir / "zoo.cfg"

    def _write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(
            "\n".join([
                f"tickTime={self.tick_time_ms}",
                f"dataDir={self.data_dir}",
                f"clientPort={self.port}",
                f"clientPortAddress={self.host}",
                "maxClientCnxns=0",
                f"minSessionTimeout={2 * self.tick_time_ms}",
                f"maxSessionTimeout={self.max_session_timeout_ms}",
                "admin.enableServer=false",
                "4lw.commands.whitelist=*",
                "autopurge.snapRetainCount=3",
                "autopurge.purgeInterval=1",
                *self._extra_config(),
                "",
            ])
        )
        (self.data_dir / "log4j2.properties").write_text(
            "\n".join([
                "status = error",
                "appender.file.type = File",
                "appender.file.name = file",
                f"appender.file.fileName = {self.log_file}",
                "appender.file.layout.type = PatternLayout",
                "appender.file.layout.pattern = %d{ISO8601} %-5p [%t] %c{1}: %m%n",
                "rootLogger.level = warn",
                "# 'maxCnxns is not configured' is printed at every start: not worth a warning",
                "logger.cnxnfactory.name = org.apache.zookeeper.server.ServerCnxnFactory",
                "logger.cnxnfactory.level = error",
                "rootLogger.appenderRef.file.ref = file",
                "",
            ])
        )

    def _extra_config(self) -> list[str]:
        """More zoo.cfg lines (an ensemble member's quorum); none for a standalone server."""
        return []

    def command(self) -> list[str]:
        return [
            java_executable(),
            *JVM_FLAGS,
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            f"-Dzookeeper.log.dir={self.data_dir}",
            "-cp",
            zookeeper_classpath(),
            self.main_class,
            str(self.config_file),
        ]

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout: float = 30.0) -> "EmbeddedZooKeeper":
        """Launch the JVM and return once the server answers `ruok` with `imok` and serves."""
        if self.is_running():
            return self
        self.launch()
        deadline = time.monotonic() + timeout
        while True:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._cleanup()
                raise EmbeddedZooKeeperError(
                    f"ZooKeeper exited with code {code} during startup on port {self.port}\n"
                    f"{self._log_tails()}"
                )
            if self.ruok() and self.is_serving():
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise EmbeddedZooKeeperError(
                    f"ZooKeeper did not answer ruok within {timeout:.0f}s on port {self.port}\n"
                    f"{self._log_tails()}"
                )
            time.sleep(0.05)

    def launch(self) -> None:
        """Start the JVM without waiting for it to serve (an ensemble member cannot serve
        before a quorum of its peers is up: adapters/zookeeper/ensemble.py launches them all,
        then waits)."""
        if self.is_running():
            return
        self._write_config()
        self._java_out = open(self.java_out_file, "ab")
        self._proc = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=self._java_out,
            stderr=subprocess.STDOUT,
            cwd=self.data_dir,
            start_new_session=True,
            preexec_fn=die_with_parent if sys.platform.startswith("linux") else None,
        )
        self._paused = False

    def _log_tails(self) -> str:
        return (f"--- {self.java_out_file} ---\n{_tail(self.java_out_file)}\n"
                f"--- {self.log_file} ---\n{_tail(self.log_file)}")

    def ruok(self) -> bool:
        try:
            return four_letter_word(self.host, self.port, "ruok", timeout=1.0) == "imok"
        except OSError:
            return False

    def is_serving(self) -> bool:
        """`ruok` answers `imok` as soon as the socket listens, before the database is loaded;
        `srvr` (which aiozk sends on every connect) only works once requests are served."""
        try:
            return four_letter_word(self.host, self.port, "srvr", timeout=1.0).startswith("Zookeeper version")
        except OSError:
            return False

    def version(self) -> str:
        """The server version from `srvr`, e.g. "3.9.5"."""
        first = four_letter_word(self.host, self.port, "srvr").splitlines()[0]
        # "Zookeeper version: 3.9.5-293c895a..., built on ..."
        return first.split(":", 1)[1].strip().split("-", 1)[0].split(",", 1)[0]

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM (the JVM closes its sockets and files), then SIGKILL after `timeout` s."""
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            if self._paused:
                self._signal(signal.SIGCONT)
                self._paused = False
            self._signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                proc.wait()
        self._cleanup()
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL: no clean shutdown, for fault tests."""
        if self.is_running():
            self._signal(signal.SIGKILL)
            self._proc.wait()
        self._cleanup()

    def _cleanup(self) -> None:
        self._proc = None
        self._paused = False
        if self._java_out is not None:
            self._java_out.close()
            self._java_out = None

    def restart(self, timeout: float = 30.0) -> "EmbeddedZooKeeper":
        """Stop and start again on the same port and data dir."""
        self.stop()
        return self.start(timeout)

    def pause(self) -> None:
        """SIGSTOP the JVM: connections stay open but nothing is answered. Returns once the
        kernel reports the process stopped (signal delivery is asynchronous)."""
        if self.is_running() and not self._paused:
            self._signal(signal.SIGSTOP)
            self._paused = True
            self._wait_state(lambda state: state in "Tt")

    def resume(self) -> None:
        if self.is_running() and self._paused:
            self._signal(signal.SIGCONT)
            self._paused = False
            self._wait_state(lambda state: state not in "Tt")

    def _wait_state(self, wanted, timeout: float = 5.0) -> None:
        stat_file = Path(f"/proc/{self._proc.pid}/stat")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                state = stat_file.read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                return  # no procfs (not Linux): nothing to wait on
            if wanted(state):
                return
            time.sleep(0.005)

    def _signal(self, sig: int) -> None:
        try:
            os.kill(self._proc.pid, sig)
        except ProcessLookupError:
            pass

    def __enter__(self) -> "EmbeddedZooKeeper":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "paused" if self._paused else ("running" if self.is_running() else "stopped")
        return f"<EmbeddedZooKeeper {self.connect_string} {state} data_dir={self.data_dir}>"


def serve_in_foreground(make, data_dir: str | os.PathLike | None, failed) -> int:
    """Run what `make(data_dir)` returns (a server or an ensemble: `start()`, `stop()`,
    `connect_string`) in the foreground until SIGTERM/SIGINT, printing its connect string once it
    serves. `failed()` is polled: a message ends the run with exit code 1 (it is printed as
    `error: ...`); None lets it run on. Without `data_dir` the data go to a temporary directory,
    removed at the end. Returns the process exit code."""
    temp_dir = None
    if data_dir is None:
        temp_dir = tempfile.mkdtemp(prefix="kctl-zookeeper-")
        data_dir = temp_dir
    served = make(data_dir)
    stop_requested = threading.Event()

    def request_stop(signum, frame):
        stop_requested.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            served.start()
        except EmbeddedZooKeeperError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        print(served.connect_string, flush=True)
        while not stop_requested.wait(0.2):
            problem = failed(served)
            if problem is not None:
                print(f"error: {problem}", file=sys.stderr)
                return 1
        return 0
    finally:
        served.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if temp_dir:
            shutil.rmtree(temp_dir, ignore_errors=True)


def serve_forever(port: int = 2181, data_dir: str | os.PathLike | None = None) -> int:
    """`kctl zookeeper`: run a server in the foreground until SIGTERM/SIGINT.

    Prints exactly one line, the connect string, once the server answers. Returns the process
    exit code: 0 after a requested stop, 1 if the server died by itself or failed to start.
    """

    def died(server: EmbeddedZooKeeper) -> str | None:
        if server.is_running():
            return None
        return f"ZooKeeper exited unexpectedly\n{server._log_tails()}"

    return serve_in_foreground(lambda data_dir: EmbeddedZooKeeper(data_dir, port=port), data_dir, died)
