"""`kctl node` against a ZooKeeper it cannot use, and stopping it at any stage: real processes,
real sockets. A signal ends a node within about a second whatever it is waiting for; a refused
connection and a name that does not resolve fail at once with the reason; only silence waits
for the connect timeout."""
from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import pytest

from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.sim.cluster import LocalCluster, wait_for
from adapters.zookeeper.session import Unreachable, ZkSession
from controller_core.values import ReplicaAssignment

# the interpreter's start and imports (about 1.5 s on a loaded machine) are not what is measured
PROMPT = 1.5


@pytest.fixture
def silent_server():
    """A TCP listener that never accepts: connections complete in the kernel and then nothing
    answers, as with a firewalled or hung ZooKeeper."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    try:
        yield f"127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


@pytest.fixture
def refusing_address():
    """A loopback port with nothing listening (bound once to find it, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def _node(zookeeper: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "adapters.cli", "node", "--broker-id", "1",
                             "--zookeeper", zookeeper, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_until_importing_is_over(proc: subprocess.Popen, seconds: float = 4.0) -> None:
    """Give the process time to reach its connect loop; it must still be waiting there."""
    time.sleep(seconds)
    assert proc.poll() is None, proc.communicate()


def _stopped_within(proc: subprocess.Popen, sig: int, limit: float) -> tuple[float, int, str]:
    sent = time.monotonic()
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=limit + 30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return time.monotonic() - sent, proc.returncode, err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_ends_a_node_that_waits_for_a_silent_zookeeper(silent_server, sig):
    proc = _node(silent_server)
    _wait_until_importing_is_over(proc)
    took, code, err = _stopped_within(proc, sig, PROMPT)
    assert took < PROMPT, f"took {took:.1f} s to stop: {err}"
    assert code == 0, err
    assert "Traceback" not in err and "Repair loop" not in err, err


def test_a_refused_connection_fails_at_once_with_the_reason(refusing_address):
    started = time.monotonic()
    proc = _node(refusing_address)
    _, err = proc.communicate(timeout=60)
    took = time.monotonic() - started
    assert proc.returncode == 1
    assert err.strip() == f"error: cannot connect to ZooKeeper at {refusing_address}: connection refused"
    assert took < 8, f"took {took:.1f} s (the connect timeout is 30 s)"


def test_a_host_that_does_not_resolve_fails_at_once_with_the_reason():
    started = time.monotonic()
    proc = _node("no-such-zookeeper.invalid:2181/kafka")
    _, err = proc.communicate(timeout=60)
    took = time.monotonic() - started
    assert proc.returncode == 1
    assert err.startswith("error: cannot connect to ZooKeeper at no-such-zookeeper.invalid:2181: host "
                          "'no-such-zookeeper.invalid' does not resolve"), err
    assert err.count("\n") == 1 and "ConnectionLost" not in err
    assert took < 8, f"took {took:.1f} s (the connect timeout is 30 s)"


@pytest.mark.parametrize("connect, bad", [("localhost:abc", "'abc'"), ("localhost:99999", "'99999'"),
                                          ("h1:2181,h2:/x", "''")])
def test_a_bad_port_is_reported_as_a_bad_port(connect, bad):
    proc = _node(connect)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert err.count("\n") == 1 and f"bad port {bad}" in err, err


async def test_silence_waits_for_the_timeout_and_says_so(silent_server):
    started = time.monotonic()
    with pytest.raises(Unreachable) as caught:
        await ZkSession.connect(silent_server + "/chroot", timeout=1.0)
    assert 0.9 < time.monotonic() - started < 3
    assert str(caught.value) == f"no ZooKeeper answered at {silent_server} within 1s"


async def test_refused_and_unresolvable_together_are_both_named(refusing_address):
    with pytest.raises(Unreachable) as caught:
        await ZkSession.connect(f"{refusing_address},no-such-zookeeper.invalid:2181", timeout=20)
    text = str(caught.value)
    assert text.startswith("cannot connect to ZooKeeper: ")
    assert f"{refusing_address}: connection refused" in text and "does not resolve" in text


async def test_one_silent_server_among_refusing_ones_is_waited_for(refusing_address, silent_server):
    started = time.monotonic()
    with pytest.raises(Unreachable) as caught:
        await ZkSession.connect(f"{refusing_address},{silent_server}", timeout=2.0)
    assert time.monotonic() - started > 1.9
    assert "no ZooKeeper answered" in str(caught.value)


# -- stopping a node that must hand over leadership ------------------------------------------------


async def _lone_leader(zk_connect, tmp_path, settings):
    """Broker 1 leads a partition whose other replica (broker 2) was killed: leadership has
    nowhere to go, so every controlled-shutdown attempt fails (Kafka leaves replication
    factor 1 out of a controlled shutdown, hence the second replica)."""
    local = LocalCluster(zk_connect, tmp_path, settings={"controlled.shutdown.retry.backoff.ms": "300", **settings})
    admin = await ZkSession.connect(zk_connect)
    try:
        async def registered(b):
            return await admin.exists(zkpaths.broker(b)) is not None

        local.start_node(1)
        await wait_for(lambda: registered(1), timeout=60, what="broker 1 registered")
        local.start_node(2)
        await wait_for(lambda: registered(2), timeout=60, what="broker 2 registered")
        await admin.create(zkpaths.topic("solo"), zkdata.encode_topic_assignment({0: ReplicaAssignment((1, 2))}))

        async def state():
            try:
                data, stat = await admin.get(zkpaths.partition_state("solo", 0))
            except Exception:  # noqa: BLE001 - not written yet
                return None
            return zkdata.decode_partition_state(data, stat.version)

        async def led_alone():
            now = await state()
            return now is not None and now.leader == 1 and list(now.isr) == [1]
        await wait_for(lambda: _is(state, 1), timeout=60, what="solo-0 led by broker 1")
        local.kill(2)
        await wait_for(led_alone, timeout=60, what="solo-0 led by broker 1 alone")
    except BaseException:
        local.stop_all()
        raise
    finally:
        await admin.close()
    return local


async def _is(state, leader):
    now = await state()
    return now is not None and now.leader == leader


async def test_controlled_shutdown_makes_at_most_max_retries_attempts_as_kafka_does(zk_connect, tmp_path):
    local = await _lone_leader(zk_connect, tmp_path, {"controlled.shutdown.max.retries": "3"})
    with local:
        assert local.stop(1, timeout=60) == 0
        log = local.nodes[1].log_text()
    attempts = [line for line in log.splitlines() if "controlled shutdown attempt" in line]
    assert [a.split("controlled shutdown attempt ")[1].split(":")[0] for a in attempts] == ["1", "2", "3"], log
    assert "did not complete; shutting down anyway" in log


async def test_no_attempt_when_max_retries_is_zero(zk_connect, tmp_path):
    local = await _lone_leader(zk_connect, tmp_path, {"controlled.shutdown.max.retries": "0"})
    with local:
        assert local.stop(1, timeout=60) == 0
        log = local.nodes[1].log_text()
    assert "controlled shutdown attempt" not in log, log


async def test_a_second_signal_cuts_a_waiting_controlled_shutdown_short(zk_connect, tmp_path):
    local = await _lone_leader(zk_connect, tmp_path, {"controlled.shutdown.max.retries": "10",
                                                      "controlled.shutdown.retry.backoff.ms": "5000"})
    with local:
        node = local.nodes[1]
        node.signal(signal.SIGTERM)

        async def first_attempt_failed():
            return "controlled shutdown attempt 1" in node.log_text()
        await wait_for(first_attempt_failed, timeout=30, what="the first attempt")
        sent = time.monotonic()
        node.signal(signal.SIGINT)
        code = node.wait(30)
        took = time.monotonic() - sent
    assert code == 0
    assert took < PROMPT, f"took {took:.1f} s"
    assert "second signal" in node.log_text()

