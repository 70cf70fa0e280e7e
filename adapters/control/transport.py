"""The control channel over asyncio TCP: a server, a client and the controller's per-broker sender.

The framing is in `adapters.control.framing`, which is pure. This module only moves bytes:

- `ControlServer` runs on every node. It decodes request frames and awaits
  `handler(frame) -> response body`, then writes the response with the same correlation id.
  It handles the requests of one connection one at a time, in arrival order (as Kafka does), so a
  LeaderAndIsr is applied before the UpdateMetadata sent after it. When a handler raises, the
  server sends an error response and keeps the connection. When a peer sends a bad frame
  (garbage, oversized, unauthenticated, tampered), the server logs one line and closes that
  connection. The server itself keeps running.
- `ControlClient` sends requests and matches responses by correlation id. It connects on first
  use and again after the connection is lost. Its failures are `ControlChannelError`
  subclasses with a readable message.
- `BrokerSendQueue` is Kafka's RequestSendThread: the controller's FIFO of requests for one
  broker. It sends them one at a time in order, retries each with exponential backoff until the
  broker acknowledges it, and stops when the broker leaves /brokers/ids.

Big bodies are serialised with `encode_body_async`, which gives the event loop a turn every
couple of milliseconds. A 100,000-partition UpdateMetadata therefore does not stop other
brokers' queues, the controller loop or the ZooKeeper session while it is encoded.
"""
from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import os
import time
from collections import deque
from typing import Any, Awaitable, Callable, Generator

from adapters.control.framing import (
    DEFAULT_COMPRESS_THRESHOLD,
    DEFAULT_MAX_FRAME_BYTES,
    LENGTH_PREFIX_SIZE,
    MAGIC,
    MAX_CORRELATION_ID,
    Body,
    EncodedBody,
    Frame,
    FrameDecoder,
    FrameError,
    encode_body_steps,
    encode_frame_steps,
    normalise_secret,
)

logger = logging.getLogger(__name__)

_READ_SIZE = 256 * 1024
_SLICE_SECONDS = 0.002
"""The longest stretch of encoding work between two turns of the event loop."""
_CLOSE_GRACE_SECONDS = 1.0

Handler = Callable[[Frame], Awaitable[dict]]
ForeignHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, bytes, str], Awaitable[None]]
"""Serves a connection whose first frame is not a control frame (bytes read so far, peer name)."""


# ---------------------------------------------------------------------------------------------
# errors


class ControlChannelError(Exception):
    """Base class of the control channel's failures."""


class ControlConnectionError(ControlChannelError):
    """The peer could not be reached, or the connection was lost before the response arrived."""


class ControlTimeout(ControlChannelError):
    """No response arrived within the timeout."""


class ControlProtocolError(ControlChannelError):
    """The peer sent bytes that are not a valid frame (also: a response with a bad MAC)."""


class ControlFrameTooLarge(ControlChannelError):
    """The request does not fit the frame size limit. Retrying it will not help."""


class ControlRemoteError(ControlChannelError):
    """The peer's handler failed and it sent an error response.

    `body` is the error response body, `{"error": <kind>, "message": <text>}`.
    """

    def __init__(self, api: str, address: str, body: dict):
        self.api = api
        self.body = body
        self.error = str(body.get("error", "UnknownError"))
        self.message = str(body.get("message", ""))
        super().__init__(f"{api} to {address} failed on the peer: {self.error}: {self.message}")


# ---------------------------------------------------------------------------------------------
# cooperative encoding


async def _drive(steps: Generator[None, None, Any]) -> Any:
    """Run an encode generator and give the event loop a turn every `_SLICE_SECONDS`."""
    clock = time.perf_counter
    deadline = clock() + _SLICE_SECONDS
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
        if clock() >= deadline:
            await asyncio.sleep(0)
            deadline = clock() + _SLICE_SECONDS


async def encode_body_async(
    body: dict, *, compress_threshold: int | None = DEFAULT_COMPRESS_THRESHOLD
) -> EncodedBody:
    """`wire.encode_body` without holding the event loop for more than about 2 ms at a time.

    Encode once, then pass the `EncodedBody` to `ControlClient.request` or `BrokerSendQueue.put`
    for every broker that gets the same body (as with UpdateMetadata).
    """
    return await _drive(encode_body_steps(body, compress_threshold=compress_threshold))


async def encode_frame_async(
    api: str,
    correlation_id: int,
    body: Body,
    *,
    secret: bytes | str | None = None,
    is_response: bool = False,
    is_error: bool = False,
    compress_threshold: int | None = DEFAULT_COMPRESS_THRESHOLD,
) -> bytes:
    """`wire.encode_frame`, giving the event loop a turn between slices of work."""
    return await _drive(
        encode_frame_steps(
            api,
            correlation_id,
            body,
            secret=secret,
            is_response=is_response,
            is_error=is_error,
            compress_threshold=compress_threshold,
        )
    )


def _peer_name(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)


async def _close_writer(writer: asyncio.StreamWriter) -> None:
    """Close a connection, and abort it if a peer that does not read keeps it from flushing."""
    writer.close()
    try:
        async with asyncio.timeout(_CLOSE_GRACE_SECONDS):
            await writer.wait_closed()
    except TimeoutError:
        writer.transport.abort()
    except OSError:
        pass
    except asyncio.CancelledError:
        writer.transport.abort()
        raise


# ---------------------------------------------------------------------------------------------
# server


class ControlServer:
    """Serves control requests on `host:port` (port 0 picks a free port, read it from `.port`).

    `handler(frame)` is awaited for each request and returns the response body, a dict. If it
    raises, the client gets an error response `{"error": <exception class>, "message": ...}`.
    With a `secret`, a frame that is not authenticated with it closes the connection before the
    handler sees anything. With `foreign`, a connection whose first bytes are not a control frame
    (no magic after the length prefix: a Kafka client) is handed to it instead.
    """

    def __init__(
        self,
        host: str,
        port: int,
        handler: Handler,
        *,
        secret: bytes | str | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        compress_threshold: int | None = DEFAULT_COMPRESS_THRESHOLD,
        foreign: ForeignHandler | None = None,
    ):
        self._host = host
        self._foreign = foreign
        self._port = port
        self._handler = handler
        self._secret = normalise_secret(secret)
        self._max_frame_bytes = max_frame_bytes
        self._compress_threshold = compress_threshold
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task] = set()
        self._closing = False

    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        """The listening port. After `start()` this is the real port, also when 0 was asked for."""
        return self._port

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("ControlServer already started")
        self._server = await asyncio.start_server(self._serve_connection, self._host, self._port)
        sockets = self._server.sockets
        if sockets:
            self._port = sockets[0].getsockname()[1]
        logger.info("control channel: listening on %s:%d%s", self._host, self._port,
                    " (authenticated)" if self._secret else "")

    async def close(self) -> None:
        """Stop listening and close every open connection (requests being handled are cancelled)."""
        server, self._server = self._server, None
        if server is None:
            return
        self._closing = True
        server.close()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        await server.wait_closed()

    async def __aenter__(self) -> "ControlServer":
        await self.start()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = _peer_name(writer)
        decoder = FrameDecoder(self._max_frame_bytes, self._secret)
        try:
            data = await reader.read(_READ_SIZE)
            if self._foreign is not None:
                # another protocol on the same port (Kafka clients): told apart by the byte after
                # the length prefix, where every control frame has its magic
                while data and len(data) <= LENGTH_PREFIX_SIZE:
                    more = await reader.read(_READ_SIZE)
                    if not more:
                        break
                    data += more
                if len(data) > LENGTH_PREFIX_SIZE and data[LENGTH_PREFIX_SIZE] != MAGIC:
                    await self._foreign(reader, writer, data, peer)
                    return
            while True:
                if data is None:
                    data = await reader.read(_READ_SIZE)
                if not data:
                    decoder.eof()
                    return
                try:
                    frames = decoder.feed(data)
                except FrameError as err:
                    for frame in err.frames:  # the good frames before the bad bytes still count
                        if not await self._dispatch(frame, writer, peer):
                            return
                    raise
                for frame in frames:
                    if not await self._dispatch(frame, writer, peer):
                        return
                data = None
        except FrameError as err:
            logger.warning("control channel: closing connection from %s: %s [%s]", peer, err, err.reason)
        except (ConnectionError, OSError) as err:
            logger.debug("control channel: connection from %s lost: %s", peer, err)
        except asyncio.CancelledError:
            # close() cancels the connections. Python 3.11's stream server logs a cancelled
            # connection task as an error, so the task ends normally. Other cancellations propagate.
            if not self._closing:
                raise
        finally:
            self._connections.discard(task)
            await _close_writer(writer)

    async def _dispatch(self, frame: Frame, writer: asyncio.StreamWriter, peer: str) -> bool:
        """Handle one request and write its response. False: the connection must be closed."""
        if frame.is_response:
            logger.warning("control channel: closing connection from %s: it sent a response frame "
                           "(%s, correlation id %d) to a server", peer, frame.api, frame.correlation_id)
            return False
        try:
            body = self._handler(frame)
            if inspect.isawaitable(body):
                body = await body
            if not isinstance(body, dict):
                raise TypeError(f"handler returned {type(body).__name__}, not a dict")
            data = await self._response(frame, body, False)
        except Exception as exc:  # a handler bug becomes an error response, never a dead server
            logger.warning("control channel: handler for %s (correlation id %d) from %s failed: %s: %s",
                           frame.api, frame.correlation_id, peer, type(exc).__name__, exc)
            logger.debug("handler traceback", exc_info=True)
            data = await self._response(
                frame, {"error": type(exc).__name__, "message": str(exc)[:2000]}, True)
        writer.write(data)  # after an error response the connection stays usable
        await writer.drain()
        return True

    async def _response(self, frame: Frame, body: dict, is_error: bool) -> bytes:
        return await encode_frame_async(
            frame.api,
            frame.correlation_id,
            body,
            secret=self._secret,
            is_response=True,
            is_error=is_error,
            compress_threshold=self._compress_threshold,
        )


# ---------------------------------------------------------------------------------------------
# client


class _Connection:
    """One TCP connection of a ControlClient and the requests waiting for a response on it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, decoder: FrameDecoder):
        self.reader = reader
        self.writer = writer
        self.decoder = decoder
        self.pending: dict[int, asyncio.Future] = {}
        self.closed = False
        self.close_reason = "connection closed"
        self.reader_task: asyncio.Task | None = None

    def fail(self, reason: str, error_type: type[ControlChannelError]) -> None:
        """Mark the connection dead and fail every request still waiting on it."""
        if not self.closed:
            self.closed = True
            self.close_reason = reason
        self.writer.close()
        pending, self.pending = self.pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error_type(reason))


class ControlClient:
    """Sends requests to one ControlServer and returns the response bodies.

    Several requests may be in flight at once on the one connection. The connection opens on the
    first request and again after it has been lost.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        secret: bytes | str | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        compress_threshold: int | None = DEFAULT_COMPRESS_THRESHOLD,
    ):
        self._host = host
        self._port = port
        self._secret = normalise_secret(secret)
        self._max_frame_bytes = max_frame_bytes
        self._compress_threshold = compress_threshold
        self._conn: _Connection | None = None
        self._connect_lock = asyncio.Lock()
        self._ids = itertools.count()

    @property
    def address(self) -> str:
        return f"{self._host}:{self._port}"

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed

    async def request(self, api: str, body: Body, timeout: float = 30.0) -> dict:
        """Send one request and return its response body.

        Raises ControlTimeout, ControlConnectionError, ControlProtocolError, ControlRemoteError
        (the handler failed on the peer) or ControlFrameTooLarge. Arguments that cannot be encoded
        raise TypeError or ValueError.
        """
        try:
            async with asyncio.timeout(timeout):
                if not isinstance(body, EncodedBody):
                    body = await encode_body_async(body, compress_threshold=self._compress_threshold)
                correlation_id = next(self._ids) & MAX_CORRELATION_ID
                data = await encode_frame_async(api, correlation_id, body, secret=self._secret)
                if len(data) - LENGTH_PREFIX_SIZE > self._max_frame_bytes:
                    raise ControlFrameTooLarge(
                        f"{api} request is {len(data)} bytes, over the frame limit of {self._max_frame_bytes}")
                conn = await self._connect()
                future = asyncio.get_running_loop().create_future()
                conn.pending[correlation_id] = future
                try:
                    conn.writer.write(data)
                    await conn.writer.drain()
                    return await future
                except OSError as exc:
                    conn.fail(f"connection to {self.address} lost while sending {api}: {exc}",
                              ControlConnectionError)
                    raise ControlConnectionError(conn.close_reason) from None
                finally:
                    conn.pending.pop(correlation_id, None)
        except TimeoutError:
            raise ControlTimeout(f"{api} to {self.address}: no response within {timeout:g} s") from None

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        conn.fail(f"client for {self.address} closed", ControlConnectionError)
        task = conn.reader_task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            await asyncio.wait([task])
        await _close_writer(conn.writer)

    async def __aenter__(self) -> "ControlClient":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()

    async def _connect(self) -> _Connection:
        async with self._connect_lock:
            conn = self._conn
            if conn is not None and not conn.closed:
                return conn
            try:
                reader, writer = await asyncio.open_connection(self._host, self._port)
            except OSError as exc:
                reason = os.strerror(exc.errno) if exc.errno else str(exc)
                raise ControlConnectionError(f"cannot connect to {self.address}: {reason}") from None
            conn = _Connection(reader, writer, FrameDecoder(self._max_frame_bytes, self._secret))
            conn.reader_task = asyncio.create_task(self._read_responses(conn),
                                                   name=f"control-client-{self.address}")
            self._conn = conn
            return conn

    async def _read_responses(self, conn: _Connection) -> None:
        reason = f"connection to {self.address} closed by the peer before the response arrived"
        hint = " (if the channel is authenticated, check that both sides use the same secret)"
        error_type: type[ControlChannelError] = ControlConnectionError
        try:
            while True:
                data = await conn.reader.read(_READ_SIZE)
                if not data:
                    conn.decoder.eof()
                    reason += hint
                    break
                try:
                    frames = conn.decoder.feed(data)
                except FrameError as err:
                    frames = err.frames
                    for frame in frames:
                        self._deliver(conn, frame)
                    raise
                for frame in frames:
                    self._deliver(conn, frame)
        except FrameError as err:
            reason = f"bad frame from {self.address}: {err}"
            error_type = ControlProtocolError
            logger.warning("control channel: closing connection to %s: %s [%s]", self.address, err, err.reason)
        except ControlProtocolError as err:
            reason = str(err)
            error_type = ControlProtocolError
            logger.warning("control channel: closing connection to %s: %s", self.address, err)
        except OSError as exc:
            reason = f"connection to {self.address} lost: {exc}"
        finally:
            conn.fail(reason, error_type)

    def _deliver(self, conn: _Connection, frame: Frame) -> None:
        if not frame.is_response:
            raise ControlProtocolError(
                f"{self.address} sent a request frame ({frame.api}) on a client connection")
        future = conn.pending.get(frame.correlation_id)
        if future is None or future.done():
            logger.debug("control channel: late or unknown response %s #%d from %s",
                         frame.api, frame.correlation_id, self.address)
            return
        if frame.is_error:
            future.set_exception(ControlRemoteError(frame.api, self.address, frame.body))
        else:
            future.set_result(frame.body)


# ---------------------------------------------------------------------------------------------
# the controller's per-broker sender


class OffLoop:
    """A lazy request body large enough to encode in a worker thread (the controller's senders
    mark LeaderAndIsr / UpdateMetadata of thousands of partitions). Encoding 100,000 partition
    states takes seconds; on the loop it would hold the ZooKeeper session's heartbeats and every
    other broker's queue for as long. The command is an immutable value, so the thread shares
    nothing that changes."""

    __slots__ = ("encode",)

    def __init__(self, encode: Callable[[], Any]):
        self.encode = encode


class _Item:
    __slots__ = ("api", "body", "tag", "queued_at")

    def __init__(self, api: str, body: Body, tag: Any, queued_at: float):
        self.api = api
        self.body = body
        self.tag = tag
        self.queued_at = queued_at


ResponseCallback = Callable[[Any, dict, float], Any]


class BrokerSendQueue:
    """The controller's sender for one broker (Kafka's RequestSendThread).

    `put` appends a request to a FIFO. The queue task sends one request at a time, in order.
    A request that fails (no connection, timeout, bad frame from the peer) is retried with
    exponential backoff from `backoff[0]` to `backoff[1]` seconds, on a new connection, until the
    broker acknowledges it or `stop()` is called. When the broker's handler fails, the broker
    still sends an error response. That counts as acknowledged, as in Kafka, and the error body
    `{"error": ..., "message": ...}` goes to `on_response`. Retrying would fail again the same way.

    `on_response(tag, response_body, elapsed_ms)` is called from the queue task once for each
    acknowledged request, in order, and never after `stop()`. It may be a plain function or a
    coroutine function. `elapsed_ms` is the time from `put` to the acknowledgement. An exception
    in it ends the queue task and propagates (structured concurrency: crashes are not swallowed).

    Run it with `start()` (a task of its own) or by awaiting `run()` inside a task group.
    """

    def __init__(
        self,
        broker_id: int,
        host: str,
        port: int,
        *,
        secret: bytes | str | None = None,
        on_response: ResponseCallback,
        backoff: tuple[float, float] = (0.05, 2.0),
        request_timeout: float = 30.0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        compress_threshold: int | None = DEFAULT_COMPRESS_THRESHOLD,
    ):
        low, high = backoff
        if not 0 < low <= high:
            raise ValueError(f"backoff must be (min, max) with 0 < min <= max: {backoff!r}")
        self.broker_id = broker_id
        self._address = f"{host}:{port}"
        self._on_response = on_response
        self._backoff = (low, high)
        self._request_timeout = request_timeout
        self.on_dequeue: Callable[[float], None] | None = None
        self._compress_threshold = compress_threshold
        self._client = ControlClient(host, port, secret=secret, max_frame_bytes=max_frame_bytes,
                                     compress_threshold=compress_threshold)
        self._items: deque[_Item] = deque()
        self._wakeup = asyncio.Event()
        self._stopped = False
        self._in_callback = False
        self._worker: asyncio.Task | None = None
        self._task: asyncio.Task | None = None

    @property
    def address(self) -> str:
        return self._address

    @property
    def stopped(self) -> bool:
        return self._stopped

    def qsize(self) -> int:
        """Requests not yet acknowledged, including the one in flight (Kafka's QueueSize metric)."""
        return len(self._items)

    def put(self, api: str, body: Body | Callable[[], Body], tag: Any = None) -> None:
        """Queue a request. `body` is a dict (not to be mutated afterwards), an EncodedBody, or a
        function returning one, called once when the request reaches the head of the queue."""
        if self._stopped:
            logger.debug("control channel: broker %d queue is stopped, dropping %s", self.broker_id, api)
            return
        self._items.append(_Item(api, body, tag, time.monotonic()))
        self._wakeup.set()

    def start(self) -> asyncio.Task:
        """Run the queue in a task of its own (`run()` otherwise)."""
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name=f"broker-{self.broker_id}-send-queue")
        return self._task

    def stop(self) -> list[Any]:
        """Stop for good: abandon the pending requests and close the connection.

        Returns the tags of the abandoned requests (the one in flight first). No `on_response`
        call happens after this. Await `wait_stopped()` to be sure the connection is closed.
        """
        if self._stopped:
            return []
        self._stopped = True
        abandoned = [item.tag for item in self._items]
        self._items.clear()
        self._wakeup.set()
        worker = self._worker
        if worker is not None and not worker.done() and not self._in_callback:
            worker.cancel()
        return abandoned

    async def wait_stopped(self) -> None:
        """Wait until the queue task has finished (after `stop()`, or after a crash)."""
        for task in (self._task, self._worker):
            if task is not None and not task.done():
                await asyncio.wait([task])

    async def run(self) -> None:
        """Send until `stop()`. Returns normally after a stop and raises if the callback raised."""
        if self._worker is not None:
            raise RuntimeError(f"send queue for broker {self.broker_id} is already running")
        worker = asyncio.create_task(self._work(), name=f"broker-{self.broker_id}-sender")
        self._worker = worker
        try:
            await asyncio.wait([worker])
        finally:
            if not worker.done():  # run() itself was cancelled
                worker.cancel()
                await asyncio.wait([worker])
        if not worker.cancelled():
            worker.result()  # re-raise a crash

    async def _work(self) -> None:
        try:
            while not self._stopped:
                if not self._items:
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                item = self._items[0]
                if self.on_dequeue is not None:  # Kafka's RequestRateAndQueueTimeMs: waited in the queue
                    self.on_dequeue((time.monotonic() - item.queued_at) * 1000.0)
                response = await self._deliver(item)
                if self._stopped or response is None:
                    return
                self._items.popleft()
                elapsed_ms = (time.monotonic() - item.queued_at) * 1000.0
                self._in_callback = True
                try:
                    result = self._on_response(item.tag, response, elapsed_ms)
                    if inspect.isawaitable(result):
                        await result
                finally:
                    self._in_callback = False
        finally:
            await self._client.close()

    async def _deliver(self, item: _Item) -> dict | None:
        """Send `item` until it is acknowledged and return the response body (None: stopped)."""
        if isinstance(item.body, OffLoop):
            item.body = await asyncio.to_thread(item.body.encode)
        elif callable(item.body):  # a lazy body (adapters/controller/senders.py): encoded when its turn comes
            item.body = item.body()
        if not isinstance(item.body, EncodedBody):  # encode once, however many attempts it takes
            item.body = await encode_body_async(item.body, compress_threshold=self._compress_threshold)
        delay, ceiling = self._backoff
        attempt = 0
        while not self._stopped:
            attempt += 1
            try:
                response = await self._client.request(item.api, item.body, self._request_timeout)
            except ControlRemoteError as err:
                response = err.body
            except (ControlConnectionError, ControlTimeout, ControlProtocolError) as err:
                log = logger.warning if attempt == 1 else logger.debug
                log("control channel: %s to broker %d failed (attempt %d, retrying in %.2f s): %s",
                    item.api, self.broker_id, attempt, delay, err)
                await self._client.close()  # as Kafka does: a fresh connection for the retry
                await asyncio.sleep(delay)
                delay = min(delay * 2, ceiling)
                continue
            if attempt > 1:
                logger.info("control channel: %s to broker %d delivered after %d attempts",
                            item.api, self.broker_id, attempt)
            return response
        return None  # stopped: _work drops the item
