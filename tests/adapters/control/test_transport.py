"""The control channel over real loopback TCP: server, client and the per-broker send queue."""
from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time

import pytest

from adapters.control.transport import (
    BrokerSendQueue,
    ControlClient,
    ControlConnectionError,
    ControlProtocolError,
    ControlRemoteError,
    ControlServer,
    ControlTimeout,
    encode_body_async,
)
from adapters.control.framing import MAGIC, Frame, encode_frame

SECRET = b"cluster-secret"
HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


async def until(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


class Recorder:
    """A handler that records the requests it sees and answers with an echo."""

    def __init__(self):
        self.frames: list[Frame] = []

    async def __call__(self, frame: Frame) -> dict:
        self.frames.append(frame)
        if frame.api == "Fail":
            raise KeyError("no such partition")
        if frame.api == "NotADict":
            return [1, 2]  # type: ignore[return-value]
        if frame.api == "Slow":
            await asyncio.sleep(frame.body["seconds"])
        return {"api": frame.api, "echo": frame.body}


@pytest.fixture
async def recorder():
    return Recorder()


@pytest.fixture
async def server(recorder):
    async with ControlServer(HOST, 0, recorder) as srv:
        yield srv


@pytest.fixture
async def secure_server(recorder):
    async with ControlServer(HOST, 0, recorder, secret=SECRET) as srv:
        yield srv


async def raw_exchange(port: int, data: bytes, timeout: float = 2.0, half_close: bool = False) -> bytes:
    """Send raw bytes and return everything the server sends before it closes the connection."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        writer.write(data)
        if half_close:
            writer.write_eof()
        await writer.drain()
        async with asyncio.timeout(timeout):
            return await reader.read()
    finally:
        writer.close()


def channel_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "adapters.control.transport" and r.levelno >= logging.WARNING]


# --- server and client ---------------------------------------------------------------------------


async def test_request_response_over_loopback(server):
    assert server.port > 0
    async with ControlClient(HOST, server.port) as client:
        response = await client.request("LeaderAndIsr", {"controller_epoch": 3, "partitions": [1, 2]}, timeout=5)
        assert response == {"api": "LeaderAndIsr", "echo": {"controller_epoch": 3, "partitions": [1, 2]}}
        assert client.connected


async def test_concurrent_requests_share_one_connection(server, recorder):
    async with ControlClient(HOST, server.port) as client:
        responses = await asyncio.gather(
            *(client.request("Slow", {"i": i, "seconds": 0.001 * (i % 3)}, timeout=5) for i in range(50))
        )
    assert [r["echo"]["i"] for r in responses] == list(range(50))
    assert len({f.correlation_id for f in recorder.frames}) == 50
    assert [f.body["i"] for f in recorder.frames] == list(range(50))  # handled in arrival order


async def test_big_body_round_trip_compressed(server):
    body = {"partition_states": [{"topic": f"t{i // 100}", "partition": i % 100, "isr": [1, 2, 3]} for i in range(10_000)]}
    async with ControlClient(HOST, server.port) as client:
        assert (await client.request("UpdateMetadata", body, timeout=10))["echo"] == body


async def test_handler_exception_gives_error_response_and_connection_stays(server, caplog):
    async with ControlClient(HOST, server.port) as client:
        with pytest.raises(ControlRemoteError) as info:
            await client.request("Fail", {}, timeout=5)
        assert info.value.error == "KeyError" and "no such partition" in info.value.message
        with pytest.raises(ControlRemoteError, match="TypeError"):
            await client.request("NotADict", {}, timeout=5)
        assert (await client.request("Ping", {}, timeout=5))["api"] == "Ping"
        assert client.connected
    warnings = channel_warnings(caplog)
    assert len(warnings) == 2 and "handler for Fail" in warnings[0]


async def test_garbage_closes_only_that_connection(server, recorder, caplog):
    assert await raw_exchange(server.port, b"\x00\x00\x00\x20GET / HTTP/1.1\r\nHost: x\r\n\r\n") == b""
    assert await raw_exchange(server.port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") == b""
    warnings = channel_warnings(caplog)
    assert len(warnings) == 2
    assert "bad magic" in warnings[0] and "closing connection from 127.0.0.1" in warnings[0]
    assert "more than the limit" in warnings[1]
    async with ControlClient(HOST, server.port) as client:
        assert (await client.request("Ping", {"ok": True}, timeout=5))["echo"] == {"ok": True}
    assert [f.api for f in recorder.frames] == ["Ping"]


async def test_oversized_frame_is_refused_without_reading_the_body(recorder, caplog):
    async with ControlServer(HOST, 0, recorder, max_frame_bytes=1024) as srv:
        # Only the prefix is sent: the server must close without waiting for 10 MB that never come.
        assert await raw_exchange(srv.port, struct.pack(">IBB", 10_000_000, MAGIC, 1), timeout=2) == b""
    assert "10000000 bytes, more than the limit of 1024" in channel_warnings(caplog)[0]
    assert recorder.frames == []


async def test_truncated_frame_is_logged(server, recorder, caplog):
    assert await raw_exchange(server.port, encode_frame("Ping", 1, {"a": 1})[:-2], half_close=True) == b""
    assert "stream ended inside a frame" in channel_warnings(caplog)[0]
    assert recorder.frames == []


async def test_response_frame_sent_to_a_server_closes_the_connection(server, recorder, caplog):
    assert await raw_exchange(server.port, encode_frame("Ping", 1, {}, is_response=True)) == b""
    assert "sent a response frame" in channel_warnings(caplog)[0]
    assert recorder.frames == []


async def test_good_frames_before_garbage_in_the_same_chunk_are_answered(server, recorder):
    reply = await raw_exchange(server.port, encode_frame("Ping", 9, {}) + b"\x00\x00\x00\x20garbage")
    assert reply.startswith(struct.pack(">I", len(reply) - 4))  # one whole response frame
    assert [f.correlation_id for f in recorder.frames] == [9]


async def test_client_timeout(server):
    async with ControlClient(HOST, server.port) as client:
        started = time.monotonic()
        with pytest.raises(ControlTimeout, match="no response within 0.2 s"):
            await client.request("Slow", {"seconds": 5}, timeout=0.2)
        assert time.monotonic() - started < 1


async def test_connection_refused_is_a_clear_error():
    port = free_port()
    async with ControlClient(HOST, port) as client:
        with pytest.raises(ControlConnectionError, match=f"cannot connect to 127.0.0.1:{port}"):
            await client.request("Ping", {}, timeout=2)


async def test_client_reconnects_after_the_server_restarts(recorder):
    srv = ControlServer(HOST, 0, recorder)
    await srv.start()
    port = srv.port
    async with ControlClient(HOST, port) as client:
        assert (await client.request("Ping", {"n": 1}, timeout=5))["echo"] == {"n": 1}
        await srv.close()
        await until(lambda: not client.connected)
        with pytest.raises(ControlConnectionError):
            await client.request("Ping", {"n": 2}, timeout=2)
        async with ControlServer(HOST, port, recorder):
            assert (await client.request("Ping", {"n": 3}, timeout=5))["echo"] == {"n": 3}


async def test_server_close_fails_in_flight_requests(recorder):
    srv = ControlServer(HOST, 0, recorder)
    await srv.start()
    async with ControlClient(HOST, srv.port) as client:
        pending = asyncio.create_task(client.request("Slow", {"seconds": 10}, timeout=10))
        await until(lambda: recorder.frames)
        await srv.close()
        with pytest.raises(ControlConnectionError, match="closed by the peer"):
            await pending


async def test_encoding_a_big_body_keeps_the_event_loop_responsive():
    body = {"partition_states": [{"topic": f"t{i // 100}", "partition": i % 100, "leader": 1, "leader_epoch": 4,
                                  "isr": [1, 2, 3], "replicas": [1, 2, 3]} for i in range(50_000)]}
    gaps: list[float] = []

    async def ticker():
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    started = time.perf_counter()
    encoded = await encode_body_async(body)
    elapsed = time.perf_counter() - started
    tick.cancel()
    assert encoded.compressed
    # One json.dumps of this body holds the loop for the whole `elapsed` (~0.2 s on a slow box);
    # sliced, no turn of the loop waits more than a few milliseconds.
    assert max(gaps) < min(0.05, elapsed / 3), (max(gaps), elapsed)


# --- authentication ------------------------------------------------------------------------------


async def test_authenticated_request_works(secure_server, recorder):
    async with ControlClient(HOST, secure_server.port, secret=SECRET) as client:
        assert (await client.request("LeaderAndIsr", {"leader": 1}, timeout=5))["echo"] == {"leader": 1}
    assert len(recorder.frames) == 1


@pytest.mark.parametrize("secret", [None, b"wrong-secret"])
async def test_client_without_the_secret_is_refused(secure_server, recorder, caplog, secret):
    async with ControlClient(HOST, secure_server.port, secret=secret) as client:
        with pytest.raises(ControlConnectionError, match="same secret"):
            await client.request("LeaderAndIsr", {"leader": 1}, timeout=5)
    assert recorder.frames == []
    (warning,) = channel_warnings(caplog)
    assert ("no MAC" if secret is None else "MAC does not match") in warning


async def test_forged_leader_and_isr_is_rejected(secure_server, recorder):
    genuine = bytearray(encode_frame("LeaderAndIsr", 1, {"leader": 1}, secret=SECRET, compress_threshold=None))
    genuine[-2] = ord("3")  # {"leader":3}: same MAC, altered body
    assert await raw_exchange(secure_server.port, bytes(genuine)) == b""
    assert recorder.frames == []


async def test_client_refuses_unauthenticated_responses(server):
    # The server has no secret, so its responses carry no MAC: a client with a secret rejects them.
    async with ControlClient(HOST, server.port, secret=SECRET) as client:
        with pytest.raises(ControlProtocolError, match="no MAC"):
            await client.request("Ping", {}, timeout=5)


# --- the per-broker send queue -------------------------------------------------------------------


class Acks:
    def __init__(self):
        self.calls: list[tuple] = []

    def __call__(self, tag, body, elapsed_ms):
        self.calls.append((tag, body, elapsed_ms))

    @property
    def tags(self):
        return [c[0] for c in self.calls]


async def test_send_queue_retries_until_the_broker_is_up_and_keeps_order(recorder):
    port = free_port()
    acks = Acks()
    queue = BrokerSendQueue(2, HOST, port, secret=SECRET, on_response=acks, backoff=(0.01, 0.05))
    for i in range(5):
        queue.put("LeaderAndIsr", {"i": i}, tag=f"req-{i}")
    queue.start()
    await asyncio.sleep(0.2)
    assert acks.calls == [] and queue.qsize() == 5
    async with ControlServer(HOST, port, recorder, secret=SECRET):
        await until(lambda: len(acks.calls) == 5)
        queue.put("UpdateMetadata", {"i": 5}, tag="req-5")
        await until(lambda: len(acks.calls) == 6)
        assert queue.qsize() == 0
    assert acks.tags == [f"req-{i}" for i in range(6)]
    assert [f.body["i"] for f in recorder.frames] == list(range(6))  # each delivered once, in order
    assert acks.calls[0][1] == {"api": "LeaderAndIsr", "echo": {"i": 0}}
    assert acks.calls[0][2] >= 200  # elapsed from put() includes the outage
    assert queue.stop() == []
    await queue.wait_stopped()


async def test_send_queue_resends_after_the_broker_restarts(recorder):
    port = free_port()
    acks = Acks()
    queue = BrokerSendQueue(3, HOST, port, on_response=acks, backoff=(0.01, 0.05))
    queue.start()
    async with ControlServer(HOST, port, recorder):
        queue.put("LeaderAndIsr", {"i": 0}, tag=0)
        await until(lambda: len(acks.calls) == 1)
    queue.put("LeaderAndIsr", {"i": 1}, tag=1)
    await asyncio.sleep(0.1)
    async with ControlServer(HOST, port, recorder):
        await until(lambda: len(acks.calls) == 2)
    assert acks.tags == [0, 1]
    queue.stop()
    await queue.wait_stopped()


async def test_stop_abandons_pending_requests(recorder):
    release = asyncio.Event()

    async def blocking(frame: Frame) -> dict:
        recorder.frames.append(frame)
        await release.wait()
        return {}

    acks = Acks()
    async with ControlServer(HOST, 0, blocking) as srv:
        queue = BrokerSendQueue(1, HOST, srv.port, on_response=acks)
        for i in range(3):
            queue.put("StopReplica", {"i": i}, tag=i)
        queue.start()
        await until(lambda: recorder.frames)
        assert queue.qsize() == 3
        assert queue.stop() == [0, 1, 2]
        await queue.wait_stopped()
        release.set()
        await asyncio.sleep(0.05)
        queue.put("StopReplica", {"i": 3}, tag=3)  # dropped: the broker is gone
        assert queue.qsize() == 0 and queue.stopped
    assert acks.calls == []
    assert [f.body["i"] for f in recorder.frames] == [0]


async def test_remote_error_is_acknowledged_not_retried(server, recorder):
    acks = Acks()
    queue = BrokerSendQueue(1, HOST, server.port, on_response=acks)
    queue.put("Fail", {}, tag="a")
    queue.put("Ping", {}, tag="b")
    queue.start()
    await until(lambda: len(acks.calls) == 2)
    assert acks.calls[0][1] == {"error": "KeyError", "message": "'no such partition'"}
    assert [f.api for f in recorder.frames] == ["Fail", "Ping"]
    queue.stop()
    await queue.wait_stopped()


async def test_request_timeout_is_retried_on_a_new_connection(server, recorder):
    acks = Acks()
    queue = BrokerSendQueue(1, HOST, server.port, on_response=acks, request_timeout=0.2, backoff=(0.01, 0.01))
    queue.put("Slow", {"seconds": 0.5}, tag="slow")  # the first attempt times out
    queue.start()
    await until(lambda: len(recorder.frames) >= 2)
    queue.stop()
    await queue.wait_stopped()
    assert all(f.api == "Slow" for f in recorder.frames)


async def test_run_in_a_task_group_and_async_callback(server):
    seen = []

    async def on_response(tag, body, elapsed_ms):
        await asyncio.sleep(0)
        seen.append(tag)

    queue = BrokerSendQueue(1, HOST, server.port, on_response=on_response)
    async with asyncio.TaskGroup() as group:
        group.create_task(queue.run())
        queue.put("Ping", {}, tag=1)
        queue.put("Ping", {}, tag=2)
        await until(lambda: len(seen) == 2)
        queue.stop()  # run() returns normally, so the group exits cleanly
    assert seen == [1, 2]


async def test_callback_crash_propagates_out_of_run(server):
    def on_response(tag, body, elapsed_ms):
        raise RuntimeError("bug in the controller")

    queue = BrokerSendQueue(1, HOST, server.port, on_response=on_response)
    queue.put("Ping", {}, tag=1)
    with pytest.raises(RuntimeError, match="bug in the controller"):
        await asyncio.wait_for(queue.run(), 5)


async def test_stop_while_retrying_ends_the_queue_promptly():
    acks = Acks()
    queue = BrokerSendQueue(4, HOST, free_port(), on_response=acks, backoff=(0.01, 0.02))
    queue.put("LeaderAndIsr", {}, tag="x")
    task = queue.start()
    await asyncio.sleep(0.1)  # several refused attempts by now
    assert queue.stop() == ["x"]
    await asyncio.wait_for(queue.wait_stopped(), 1)
    assert task.done() and task.exception() is None
    assert acks.calls == []


async def test_an_off_loop_body_is_encoded_in_a_worker_thread_and_delivered_in_order(recorder):
    """Large lazy bodies (OffLoop) are encoded off the loop; plain lazy ones on it; order kept."""
    import threading
    from adapters.control.transport import OffLoop

    encoded_on = {}

    def encoder(name):
        def encode():
            encoded_on[name] = threading.get_ident()
            return {"i": name}
        return encode

    port = free_port()
    acks = Acks()
    queue = BrokerSendQueue(2, HOST, port, on_response=acks, backoff=(0.01, 0.05))
    queue.put("LeaderAndIsr", OffLoop(encoder("big")), tag="big")
    queue.put("UpdateMetadata", encoder("small"), tag="small")
    queue.start()
    async with ControlServer(HOST, port, recorder):
        await until(lambda: len(acks.calls) == 2)
    assert acks.tags == ["big", "small"]
    assert [f.body["i"] for f in recorder.frames] == ["big", "small"]
    assert encoded_on["small"] == threading.get_ident()
    assert encoded_on["big"] != threading.get_ident()
    queue.stop()
    await queue.wait_stopped()
