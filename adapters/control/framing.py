"""Framing for the controller <-> broker control channel. Bytes in, frames out, and no I/O.

This module has no sockets, no asyncio and no clock. `encode_frame` turns a request or response
into bytes, and `FrameDecoder` turns a byte stream back into `Frame` values. The asyncio shell
(`adapters.control.transport`) only moves bytes between these functions and the network, so the protocol
can be tested on bytes alone (in the same way as h11 and wsproto).

Frame layout (all integers big-endian)::

    offset  size  field
    0       4     length: the number of bytes that follow this field (header + mac + body)
    4       1     magic, 0xC7
    5       1     version, 1
    6       1     flags: 0x01 response, 0x02 error (only with 0x01), 0x04 body zlib-compressed,
                         0x08 MAC present
    7       4     correlation id, unsigned; a response repeats the id of its request
    11      1     n = length of the api name (1..255)
    12      n     api name, printable ASCII ("LeaderAndIsr", "UpdateMetadata", ...)
    12+n    32    HMAC-SHA256, only when flag 0x08 is set
    ...     rest  body: compact UTF-8 JSON of an object, zlib-compressed when flag 0x04 is set

The MAC is HMAC-SHA256 with the shared secret. It covers every byte of the frame except the MAC
itself: the length prefix, the header (flags included) and the body exactly as sent (after
compression). A decoder that has a secret rejects a frame that has no MAC or has a MAC that does
not match. The digests are compared in constant time. It checks the MAC before it decompresses
or parses anything, so an unauthenticated peer cannot make it inflate a zlib bomb or parse JSON.
A decoder without a secret accepts frames with or without a MAC and does not check the MAC.
The MAC stops forged and altered frames. It does not stop a recorded frame from being sent again.
The controller epoch and leader epoch fencing in the request bodies handles replays.

Error responses (flag 0x02) carry `{"error": <kind>, "message": <text>}`.

Big bodies: an UpdateMetadata for 100,000 partitions is about 15 MB of JSON, and one
`json.dumps` of it holds the interpreter for a third of a second. `encode_body_steps` and
`encode_frame_steps` are generators. They do the same work in slices of a few hundred list
items, and they yield between slices. The asyncio shell drives them and gives the event loop a
turn every few milliseconds. `encode_frame` runs them to completion. The bytes are the same
in both cases.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import struct
import zlib
from dataclasses import dataclass
from typing import Any, Generator, Iterator, Union

from adapters.runtime import jsonfast
from adapters.runtime.gcpause import gc_paused

MAGIC = 0xC7
VERSION = 1

FLAG_RESPONSE = 0x01
FLAG_ERROR = 0x02
FLAG_COMPRESSED = 0x04
FLAG_MAC = 0x08
_KNOWN_FLAGS = FLAG_RESPONSE | FLAG_ERROR | FLAG_COMPRESSED | FLAG_MAC

MAC_SIZE = 32
MAX_API_LENGTH = 255
MAX_CORRELATION_ID = 0xFFFF_FFFF

DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
"""The largest frame a decoder accepts: the length prefix value and also the decompressed body."""

DEFAULT_COMPRESS_THRESHOLD = 64 * 1024
"""Bodies whose JSON is longer than this many bytes are zlib-compressed (None: never)."""

COMPRESS_LEVEL = 1
"""zlib level 1. Control-request JSON is very repetitive: 1.5 MB becomes 33 kB in about 4 ms,
while level 6 takes twice as long and gives only 8% smaller output."""

_LENGTH = struct.Struct(">I")
_FIXED = struct.Struct(">BBBIB")  # magic, version, flags, correlation id, api name length
LENGTH_PREFIX_SIZE = _LENGTH.size
MIN_FRAME_LENGTH = _FIXED.size + 1  # the smallest legal value of the length prefix

_PIECE_BUDGET = 2048
"""About how many JSON values (list items, dict entries and their direct children) one encode
step serialises. On the reference machine 2,048 is about 200 partition states, or 1 ms."""

_SLICE_BYTES = 256 * 1024
"""How many bytes one MAC step hashes."""

_GC_PAUSE_BYTES = 1024 * 1024
"""Above this size, the cyclic GC is paused while the body is parsed (see `_parse_json`)."""


# ---------------------------------------------------------------------------------------------
# values


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded frame. `body` is the JSON object of the request or response."""

    api: str
    correlation_id: int
    is_response: bool
    body: dict[str, Any]
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class EncodedBody:
    """A body already serialised, so that it can be sent many times or to many brokers.

    `data` holds the bytes that go on the wire after the header: JSON, or a zlib stream of JSON
    when `compressed` is true. `json_size` is the length of the uncompressed JSON.
    """

    data: bytes
    compressed: bool
    json_size: int


Body = Union[dict, EncodedBody]


class FrameError(ValueError):
    """The byte stream is not a valid frame sequence. The connection cannot be used any more.

    `reason` is a short fixed code for tests and metrics: "oversized", "too-short",
    "bad-magic", "unsupported-version", "bad-header", "missing-mac", "bad-mac",
    "bad-compression", "malformed-json", "not-an-object", "truncated".
    `frames` holds the valid frames that the same `feed` call decoded before the error.
    """

    def __init__(self, reason: str, message: str, frames: list[Frame] | None = None):
        super().__init__(message)
        self.reason = reason
        self.frames: list[Frame] = frames if frames is not None else []


def normalise_secret(secret: bytes | str | None) -> bytes | None:
    """Turn the configured shared secret into HMAC key bytes. None means no authentication."""
    if secret is None:
        return None
    if isinstance(secret, str):
        secret = secret.encode("utf-8")
    if not isinstance(secret, (bytes, bytearray)):
        raise TypeError(f"secret must be bytes or str, not {type(secret).__name__}")
    if not secret:
        raise ValueError("secret must not be empty (use None to disable authentication)")
    return bytes(secret)


# ---------------------------------------------------------------------------------------------
# encoding

_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
_dumps = _ENCODER.encode


def _size(value: Any) -> int:
    """Number of direct children of a JSON container, or -1 for a scalar."""
    kind = type(value)
    if kind is dict or kind is list or kind is tuple:
        return len(value)
    return -1


def _pieces(value: Any, depth: int) -> Iterator[str]:
    """Yield strings whose concatenation is exactly `_dumps(value)`.

    A container is split into pieces when it is big (more than `_PIECE_BUDGET` children) or
    when it is within `depth` levels of the top. Small containers are serialised in one call to
    the C encoder. So a body such as `{"partition_states": [100,000 dicts]}` is encoded as a few
    hundred slices of about 200 partitions each.
    """
    size = _size(value)
    if size > _PIECE_BUDGET or (depth > 0 and size > 0):
        if type(value) is dict:
            yield from _dict_pieces(value, depth - 1)
        else:
            yield from _list_pieces(value, depth - 1)
    else:
        yield _dumps(value)


def _list_pieces(items: list | tuple, depth: int) -> Iterator[str]:
    yield "["
    sep = ""
    run: list = []
    cost = 0
    for item in items:
        size = _size(item)
        if size > _PIECE_BUDGET or (depth > 0 and size > 0):
            if run:
                yield sep + _dumps(run)[1:-1]
                sep, run, cost = ",", [], 0
            yield sep
            sep = ","
            yield from _pieces(item, depth)
            continue
        run.append(item)
        cost += 1 + (size if size > 0 else 0)
        if cost >= _PIECE_BUDGET:
            yield sep + _dumps(run)[1:-1]
            sep, run, cost = ",", [], 0
    if run:
        yield sep + _dumps(run)[1:-1]
    yield "]"


def _dict_pieces(mapping: dict, depth: int) -> Iterator[str]:
    yield "{"
    sep = ""
    run: dict = {}
    cost = 0
    for key, item in mapping.items():
        size = _size(item)
        if size > _PIECE_BUDGET or (depth > 0 and size > 0):
            if run:
                yield sep + _dumps(run)[1:-1]
                sep, run, cost = ",", {}, 0
            # '{"key":0}'[1:-2] is '"key":'. This converts the key exactly as json does.
            yield sep + _dumps({key: 0})[1:-2]
            sep = ","
            yield from _pieces(item, depth)
            continue
        run[key] = item
        cost += 1 + (size if size > 0 else 0)
        if cost >= _PIECE_BUDGET:
            yield sep + _dumps(run)[1:-1]
            sep, run, cost = ",", {}, 0
    if run:
        yield sep + _dumps(run)[1:-1]
    yield "}"


def encode_body_steps(
    body: dict, *, compress_threshold: int | None = DEFAULT_COMPRESS_THRESHOLD
) -> Generator[None, None, EncodedBody]:
    """Serialise `body` a slice at a time. Each `next()` does about a millisecond of work.

    The generator's return value (StopIteration.value) is the `EncodedBody`. Raises TypeError or
    ValueError like `json.dumps` for values that are not JSON (a caller bug, not a FrameError).
    """
    if not isinstance(body, dict):
        raise TypeError(f"a frame body must be a dict (JSON object), not {type(body).__name__}")
    parts: list[bytes] = []
    json_size = 0
    compressor = None
    for piece in _pieces(body, 2):
        chunk = piece.encode("ascii")  # ensure_ascii: the JSON is pure ASCII
        json_size += len(chunk)
        if compressor is not None:
            parts.append(compressor.compress(chunk))
        else:
            parts.append(chunk)
            if compress_threshold is not None and json_size > compress_threshold:
                # Compress as we go, so that no single step handles the whole body at the end.
                compressor = zlib.compressobj(COMPRESS_LEVEL)
                parts = [compressor.compress(b"".join(parts))]
        yield
    if compressor is None:
        return EncodedBody(b"".join(parts), False, json_size)
    parts.append(compressor.flush())
    return EncodedBody(b"".join(parts), True, json_size)


def _check_api(api: str) -> bytes:
    if not isinstance(api, str):
        raise TypeError(f"api must be a str, not {type(api).__name__}")
    raw = api.encode("ascii", "replace")
    if not 1 <= len(raw) <= MAX_API_LENGTH or not (api.isascii() and api.isprintable()):
        raise ValueError(f"api name must be 1..{MAX_API_LENGTH} printable ASCII characters: {api!r}")
    return raw


def encode_frame_steps(
    api: str,
    correlation_id: int,
    body: Body,
    *,
    secret: bytes | str | None = None,
    is_response: bool = False,
    is_error: bool = False,
    compress_threshold: int | None = DEFAULT_COMPRESS_THRESHOLD,
) -> Generator[None, None, bytes]:
    """`encode_frame`, as a generator that yields between slices of work (see module doc)."""
    key = normalise_secret(secret)
    api_raw = _check_api(api)
    if type(correlation_id) is not int or not 0 <= correlation_id <= MAX_CORRELATION_ID:
        raise ValueError(f"correlation id must be an int in 0..{MAX_CORRELATION_ID}: {correlation_id!r}")
    if is_error and not is_response:
        raise ValueError("only a response can be an error")
    if isinstance(body, EncodedBody):
        encoded = body
    else:
        encoded = yield from encode_body_steps(body, compress_threshold=compress_threshold)

    flags = (
        (FLAG_RESPONSE if is_response else 0)
        | (FLAG_ERROR if is_error else 0)
        | (FLAG_COMPRESSED if encoded.compressed else 0)
        | (FLAG_MAC if key is not None else 0)
    )
    header = _FIXED.pack(MAGIC, VERSION, flags, correlation_id, len(api_raw)) + api_raw
    length = len(header) + (MAC_SIZE if key is not None else 0) + len(encoded.data)
    if length > 0xFFFF_FFFF:
        raise ValueError(f"frame of {length} bytes does not fit the 4-byte length prefix")
    prefix = _LENGTH.pack(length)
    if key is None:
        return b"".join((prefix, header, encoded.data))
    mac = hmac.new(key, prefix + header, hashlib.sha256)
    view = memoryview(encoded.data)
    for start in range(0, len(view), _SLICE_BYTES):
        mac.update(view[start : start + _SLICE_BYTES])
        yield
    return b"".join((prefix, header, mac.digest(), encoded.data))


def _run(steps: Generator[None, None, Any]) -> Any:
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def encode_body(body: dict, *, compress_threshold: int | None = DEFAULT_COMPRESS_THRESHOLD) -> EncodedBody:
    """Serialise a body once, for example to send the same UpdateMetadata to every broker."""
    return _run(encode_body_steps(body, compress_threshold=compress_threshold))


def encode_frame(
    api: str,
    correlation_id: int,
    body: Body,
    *,
    secret: bytes | str | None = None,
    is_response: bool = False,
    is_error: bool = False,
    compress_threshold: int | None = DEFAULT_COMPRESS_THRESHOLD,
) -> bytes:
    """Return the bytes of one frame. `body` is a JSON-compatible dict or an `EncodedBody`.

    With a `secret` the frame carries an HMAC-SHA256. Bodies whose JSON is longer than
    `compress_threshold` bytes are zlib-compressed (None turns compression off). Bad arguments
    raise TypeError or ValueError.
    """
    return _run(
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


# ---------------------------------------------------------------------------------------------
# decoding


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_json(raw: bytes) -> Any:
    # orjson where it gives json's value (adapters/runtime/jsonfast.py): the standard parser was
    # half of a broker's time on a LeaderAndIsr. The cyclic GC sees every container a parse
    # allocates; for a 100,000-partition body it ran hundreds of useless collections, which made
    # parsing 2.5 times slower. A parse creates no cycles, so for big bodies the GC is paused
    # (adapters/runtime/gcpause.py).
    if len(raw) < _GC_PAUSE_BYTES:
        return jsonfast.loads(raw, _reject_constant)
    with gc_paused():
        return jsonfast.loads(raw, _reject_constant)


class FrameDecoder:
    """Incremental, sans-I/O frame decoder: `feed` bytes as they arrive and get whole frames back.

    Frames may arrive split at any byte boundary, and one chunk may hold several frames. Every
    problem is reported as a `FrameError` and never as another exception. After an error the
    decoder stays failed, because the stream cannot be resynchronised. Call `eof()` when the peer
    closes the stream, to detect a frame that was cut off.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, secret: bytes | str | None = None):
        if max_frame_bytes < MIN_FRAME_LENGTH:
            raise ValueError(f"max_frame_bytes must be at least {MIN_FRAME_LENGTH}")
        self._max = max_frame_bytes
        self._key = normalise_secret(secret)
        self._buf = bytearray()
        self._error: FrameError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received that are not yet part of a whole frame."""
        return len(self._buf)

    @property
    def failed(self) -> bool:
        return self._error is not None

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame]:
        """Add received bytes. Return the frames that are now complete, in stream order."""
        if self._error is not None:
            raise FrameError(self._error.reason, f"decoder already failed: {self._error}")
        buf = self._buf
        buf += data
        frames: list[Frame] = []
        pos = 0
        try:
            while True:
                available = len(buf) - pos
                if available < LENGTH_PREFIX_SIZE:
                    break
                (length,) = _LENGTH.unpack_from(buf, pos)
                if length > self._max:
                    raise FrameError(
                        "oversized",
                        f"frame declares {length} bytes, more than the limit of {self._max}",
                    )
                if length < MIN_FRAME_LENGTH:
                    raise FrameError("too-short", f"frame declares {length} bytes, less than a header")
                # Check the magic and version as soon as they arrive. A stranger speaking another
                # protocol is then rejected before we wait for a body that will never come.
                if available > 4 and buf[pos + 4] != MAGIC:
                    raise FrameError(
                        "bad-magic",
                        f"bad magic byte 0x{buf[pos + 4]:02x} (expected 0x{MAGIC:02x}): "
                        "the peer does not speak the kctl control protocol",
                    )
                if available > 5 and buf[pos + 5] != VERSION:
                    raise FrameError(
                        "unsupported-version",
                        f"unsupported protocol version {buf[pos + 5]} (this side speaks {VERSION})",
                    )
                end = pos + LENGTH_PREFIX_SIZE + length
                if end > len(buf):
                    break
                frames.append(self._parse(buf[pos:end]))
                pos = end
        except FrameError as err:
            err.frames = frames
            self._error = err
            self._buf = bytearray()
            raise
        del buf[:pos]
        return frames

    def eof(self) -> None:
        """The peer closed the stream. Raises FrameError if a partial frame is left in the buffer."""
        if self._error is not None:
            raise FrameError(self._error.reason, f"decoder already failed: {self._error}")
        if self._buf:
            have = len(self._buf)
            if have < LENGTH_PREFIX_SIZE:
                message = f"stream ended inside a length prefix ({have} of 4 bytes)"
            else:
                (length,) = _LENGTH.unpack_from(self._buf, 0)
                message = f"stream ended inside a frame ({have - 4} of {length} bytes received)"
            self._error = FrameError("truncated", message)
            self._buf = bytearray()
            raise self._error

    def _parse(self, raw: bytearray) -> Frame:
        """Decode one whole frame. `raw` starts with the length prefix."""
        _magic, _version, flags, correlation_id, api_len = _FIXED.unpack_from(raw, LENGTH_PREFIX_SIZE)
        if flags & ~_KNOWN_FLAGS:
            raise FrameError("bad-header", f"unknown flag bits 0x{flags & ~_KNOWN_FLAGS:02x}")
        if flags & FLAG_ERROR and not flags & FLAG_RESPONSE:
            raise FrameError("bad-header", "error flag set on a request")
        api_start = LENGTH_PREFIX_SIZE + _FIXED.size
        api_end = api_start + api_len
        body_start = api_end + (MAC_SIZE if flags & FLAG_MAC else 0)
        if api_len == 0:
            raise FrameError("bad-header", "empty api name")
        if body_start > len(raw):
            raise FrameError("bad-header", "header is longer than the frame")
        api_raw = bytes(raw[api_start:api_end])
        if not all(0x20 <= b < 0x7F for b in api_raw):
            raise FrameError("bad-header", f"api name is not printable ASCII: {api_raw!r}")
        view = memoryview(raw)
        body = view[body_start:]

        if self._key is not None:
            if not flags & FLAG_MAC:
                raise FrameError("missing-mac", "frame is not authenticated (no MAC) but a secret is configured")
            mac = hmac.new(self._key, view[:api_end], hashlib.sha256)
            mac.update(body)
            if not hmac.compare_digest(mac.digest(), view[api_end:body_start]):
                raise FrameError("bad-mac", "frame MAC does not match: wrong secret or altered frame")

        if flags & FLAG_COMPRESSED:
            decompressor = zlib.decompressobj()
            try:
                plain = decompressor.decompress(body, self._max + 1)
            except zlib.error as exc:
                raise FrameError("bad-compression", f"body is not a valid zlib stream: {exc}") from None
            if len(plain) > self._max:
                raise FrameError("oversized", f"decompressed body exceeds the limit of {self._max} bytes")
            if not decompressor.eof:
                raise FrameError("bad-compression", "zlib stream is truncated")
            if decompressor.unused_data:
                raise FrameError("bad-compression", "bytes after the end of the zlib stream")
            body = plain
        try:
            value = _parse_json(bytes(body))
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise FrameError("malformed-json", f"body of {api_raw.decode()} is not valid JSON: {detail[:200]}") from None
        if type(value) is not dict:
            raise FrameError("not-an-object", f"body of {api_raw.decode()} is a JSON {type(value).__name__}, not an object")
        return Frame(
            api=api_raw.decode("ascii"),
            correlation_id=correlation_id,
            is_response=bool(flags & FLAG_RESPONSE),
            body=value,
            is_error=bool(flags & FLAG_ERROR),
        )
