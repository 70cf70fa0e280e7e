"""The control-channel framing, tested on bytes: no sockets, no event loop."""
from __future__ import annotations

import hmac
import json
import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.control import framing as wire
from adapters.control.framing import (
    FLAG_COMPRESSED,
    FLAG_MAC,
    MAGIC,
    EncodedBody,
    Frame,
    FrameDecoder,
    FrameError,
    encode_body,
    encode_body_steps,
    encode_frame,
)

SECRET = b"cluster-secret"
BODY = {"controller_epoch": 3, "partitions": [{"topic": "t", "partition": 0, "leader": 1, "isr": [1, 2]}]}


def decode_all(data: bytes, **kwargs) -> list[Frame]:
    decoder = FrameDecoder(**kwargs)
    frames = decoder.feed(data)
    decoder.eof()
    return frames


def big_body(n: int) -> dict:
    return {
        "controller_id": 1,
        "controller_epoch": 7,
        "partition_states": [
            {"topic": f"topic-{i // 50}", "partition": i % 50, "leader": 1 + i % 5, "leader_epoch": 3,
             "isr": [1 + i % 5, 1 + (i + 1) % 5], "replicas": [1 + i % 5, 1 + (i + 1) % 5]}
            for i in range(n)
        ],
        "live_brokers": [{"id": b, "host": "127.0.0.1", "port": 9090 + b} for b in range(1, 6)],
    }


# --- layout --------------------------------------------------------------------------------------


def test_frame_layout_is_as_documented():
    data = encode_frame("Ping", 0x01020304, {"a": 1}, compress_threshold=None)
    body = b'{"a":1}'
    assert data == struct.pack(">IBBBIB", 8 + 4 + len(body), MAGIC, 1, 0, 0x01020304, 4) + b"Ping" + body


def test_round_trip_request_and_response():
    frames = decode_all(
        encode_frame("LeaderAndIsr", 7, BODY)
        + encode_frame("LeaderAndIsr", 7, {"error_code": 0}, is_response=True)
        + encode_frame("LeaderAndIsr", 8, {"error": "KeyError", "message": "x"}, is_response=True, is_error=True)
    )
    assert frames == [
        Frame("LeaderAndIsr", 7, False, BODY),
        Frame("LeaderAndIsr", 7, True, {"error_code": 0}),
        Frame("LeaderAndIsr", 8, True, {"error": "KeyError", "message": "x"}, is_error=True),
    ]


def test_json_is_compact():
    data = encode_frame("Ping", 1, {"a": [1, 2], "b": {"c": None}}, compress_threshold=None)
    assert data.endswith(b'{"a":[1,2],"b":{"c":null}}')


@pytest.mark.parametrize(
    "kwargs",
    [
        {"api": "", "correlation_id": 1},
        {"api": "x" * 256, "correlation_id": 1},
        {"api": "Lead\u00e9r", "correlation_id": 1},
        {"api": "Ping", "correlation_id": -1},
        {"api": "Ping", "correlation_id": 2**32},
    ],
)
def test_encoder_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        encode_frame(body={}, **kwargs)


def test_encoder_rejects_non_object_and_non_json_bodies():
    with pytest.raises(TypeError):
        encode_frame("Ping", 1, [1, 2])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        encode_frame("Ping", 1, {"a": object()})
    with pytest.raises(ValueError):
        encode_frame("Ping", 1, {"a": float("nan")})
    with pytest.raises(ValueError):
        encode_frame("Ping", 1, {}, is_error=True)  # an error must be a response


# --- incremental decoding ------------------------------------------------------------------------


def test_split_at_every_byte_boundary():
    data = encode_frame("UpdateMetadata", 42, BODY, secret=SECRET)
    for cut in range(len(data) + 1):
        decoder = FrameDecoder(secret=SECRET)
        first = decoder.feed(data[:cut])
        second = decoder.feed(data[cut:])
        decoder.eof()
        assert first + second == [Frame("UpdateMetadata", 42, False, BODY)], cut


def test_one_byte_at_a_time_and_several_frames_per_chunk():
    stream = b"".join(encode_frame("StopReplica", i, {"i": i}) for i in range(5))
    decoder = FrameDecoder()
    frames = []
    for i in range(len(stream)):
        frames += decoder.feed(stream[i : i + 1])
    assert [f.body["i"] for f in frames] == list(range(5))
    assert decoder.buffered == 0
    assert [f.correlation_id for f in decode_all(stream)] == list(range(5))


def test_frames_then_partial_frame_keeps_the_rest_buffered():
    one, two = encode_frame("A", 1, {}), encode_frame("B", 2, {})
    decoder = FrameDecoder()
    assert [f.api for f in decoder.feed(one + two[:5])] == ["A"]
    assert decoder.buffered == 5
    assert [f.api for f in decoder.feed(two[5:])] == ["B"]


# --- rejections ----------------------------------------------------------------------------------


def reject(data: bytes, **kwargs) -> FrameError:
    with pytest.raises(FrameError) as info:
        decode_all(data, **kwargs)
    return info.value


def test_oversized_length_is_rejected_before_the_body_arrives():
    decoder = FrameDecoder(max_frame_bytes=1024)
    with pytest.raises(FrameError) as info:
        decoder.feed(struct.pack(">I", 1025))  # only the prefix: the body is never awaited
    assert info.value.reason == "oversized"
    assert "1025" in str(info.value)


def test_frame_at_the_limit_is_accepted():
    data = encode_frame("Ping", 1, {"pad": "x" * 100}, compress_threshold=None)
    assert decode_all(data, max_frame_bytes=len(data) - 4)[0].body["pad"] == "x" * 100
    assert reject(data, max_frame_bytes=len(data) - 5).reason == "oversized"


def test_declared_length_below_a_header_is_rejected():
    assert reject(struct.pack(">I", 3) + b"abc").reason == "too-short"


def test_truncated_frame_at_eof():
    data = encode_frame("Ping", 1, BODY)
    decoder = FrameDecoder()
    assert decoder.feed(data[:-1]) == []
    with pytest.raises(FrameError) as info:
        decoder.eof()
    assert info.value.reason == "truncated"
    assert f"{len(data) - 5} of {len(data) - 4} bytes" in str(info.value)
    assert reject(data[:2]).reason == "truncated"  # inside the length prefix


def test_bad_magic_is_rejected_as_soon_as_it_arrives():
    decoder = FrameDecoder()
    with pytest.raises(FrameError) as info:
        decoder.feed(struct.pack(">I", 100) + b"G")
    assert info.value.reason == "bad-magic"
    assert "0x47" in str(info.value)


def test_http_request_is_rejected():
    assert reject(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").reason == "oversized"
    assert reject(b"\x00\x00\x00\x10GET / HTTP/1.1\r\n").reason == "bad-magic"


def test_unknown_version():
    data = bytearray(encode_frame("Ping", 1, {}))
    data[5] = 9
    error = reject(bytes(data))
    assert error.reason == "unsupported-version" and "9" in str(error)


def test_unknown_flags_and_bad_header():
    data = bytearray(encode_frame("Ping", 1, {}))
    data[6] = 0x80
    assert reject(bytes(data)).reason == "bad-header"
    data[6] = 0x02  # error flag on a request
    assert reject(bytes(data)).reason == "bad-header"
    empty_api = struct.pack(">IBBBIB", 8 + 2, MAGIC, 1, 0, 1, 0) + b"{}"
    assert reject(empty_api).reason == "bad-header"
    long_api = struct.pack(">IBBBIB", 8 + 2, MAGIC, 1, 0, 1, 200) + b"{}"
    assert reject(long_api).reason == "bad-header"
    control_char_api = struct.pack(">IBBBIB", 8 + 1 + 2, MAGIC, 1, 0, 1, 1) + b"\n{}"
    assert reject(control_char_api).reason == "bad-header"


def raw_frame(body: bytes, flags: int = 0) -> bytes:
    header = struct.pack(">BBBIB", MAGIC, 1, flags, 1, 4) + b"Ping"
    return struct.pack(">I", len(header) + len(body)) + header + body


@pytest.mark.parametrize(
    "body, reason",
    [
        (b"{", "malformed-json"),
        (b'{"a":NaN}', "malformed-json"),
        (b'{"a":Infinity}', "malformed-json"),
        (b"\xff\xfe{}", "malformed-json"),
        (b"[" * 100_000 + b"]" * 100_000, "malformed-json"),  # RecursionError, never escapes
        (b'{"a":' + b"9" * 5000 + b"}", "malformed-json"),  # int digit limit
        (b"[1,2]", "not-an-object"),
        (b'"text"', "not-an-object"),
        (b"null", "not-an-object"),
    ],
)
def test_bad_bodies(body, reason):
    assert reject(raw_frame(body)).reason == reason


def test_bad_compression():
    assert reject(raw_frame(b"not zlib", FLAG_COMPRESSED)).reason == "bad-compression"
    assert reject(raw_frame(zlib.compress(b"{}")[:-3], FLAG_COMPRESSED)).reason == "bad-compression"
    assert reject(raw_frame(zlib.compress(b"{}") + b"x", FLAG_COMPRESSED)).reason == "bad-compression"


def test_zlib_bomb_is_capped_by_the_frame_limit():
    bomb = zlib.compress(b'{"a":"' + b"x" * 2_000_000 + b'"}', 9)
    error = reject(raw_frame(bomb, FLAG_COMPRESSED), max_frame_bytes=1_000_000)
    assert error.reason == "oversized" and "decompressed" in str(error)


def test_decoder_stays_failed_and_reports_frames_before_the_error():
    decoder = FrameDecoder()
    good = encode_frame("A", 1, {})
    with pytest.raises(FrameError) as info:
        decoder.feed(good + raw_frame(b"[]"))
    assert [f.api for f in info.value.frames] == ["A"]
    with pytest.raises(FrameError):
        decoder.feed(good)
    with pytest.raises(FrameError):
        decoder.eof()


# --- authentication ------------------------------------------------------------------------------


def test_mac_round_trip_and_layout():
    data = encode_frame("LeaderAndIsr", 5, BODY, secret=SECRET)
    assert data[6] & FLAG_MAC
    assert decode_all(data, secret=SECRET) == [Frame("LeaderAndIsr", 5, False, BODY)]
    assert decode_all(data, secret=SECRET.decode()) == decode_all(data, secret=SECRET)  # str secret


def test_every_tampered_byte_is_detected():
    data = encode_frame("LeaderAndIsr", 5, {"leader": 1}, secret=SECRET)
    for i in range(len(data)):
        tampered = bytearray(data)
        tampered[i] ^= 0x01
        decoder = FrameDecoder(secret=SECRET)
        with pytest.raises(FrameError) as info:
            decoder.feed(bytes(tampered))
            decoder.eof()
        assert info.value.reason in {"bad-mac", "oversized", "truncated", "bad-magic",
                                     "unsupported-version", "bad-header", "missing-mac"}, i


def test_tampered_body_gives_bad_mac():
    data = bytearray(encode_frame("LeaderAndIsr", 5, {"leader": 1}, secret=SECRET, compress_threshold=None))
    data[-2] = ord("2")  # {"leader":2}
    assert reject(bytes(data), secret=SECRET).reason == "bad-mac"


def test_wrong_secret_is_rejected():
    data = encode_frame("LeaderAndIsr", 5, BODY, secret=b"other-secret")
    error = reject(data, secret=SECRET)
    assert error.reason == "bad-mac" and "wrong secret" in str(error)


def test_no_mac_when_required_is_rejected():
    error = reject(encode_frame("LeaderAndIsr", 5, BODY), secret=SECRET)
    assert error.reason == "missing-mac"


def test_mac_frames_are_accepted_by_a_decoder_without_secret():
    assert decode_all(encode_frame("Ping", 1, {}, secret=SECRET)) == [Frame("Ping", 1, False, {})]


def test_mac_is_checked_before_decompression():
    # An unauthenticated zlib bomb costs the receiver a MAC check, never an inflate.
    bomb = raw_frame(b"\0" * 32 + zlib.compress(b"x" * 10_000_000), FLAG_COMPRESSED | FLAG_MAC)
    assert reject(bomb, secret=SECRET, max_frame_bytes=1_000_000).reason == "bad-mac"
    assert reject(bomb, max_frame_bytes=1_000_000).reason == "oversized"  # no secret: inflated, capped


def test_empty_secret_is_refused():
    with pytest.raises(ValueError):
        FrameDecoder(secret=b"")
    with pytest.raises(ValueError):
        encode_frame("Ping", 1, {}, secret="")


# --- compression and big bodies ------------------------------------------------------------------


def test_compression_round_trip():
    body = big_body(2000)
    data = encode_frame("UpdateMetadata", 3, body, secret=SECRET, compress_threshold=1024)
    assert data[6] & FLAG_COMPRESSED
    plain = encode_frame("UpdateMetadata", 3, body, compress_threshold=None)
    assert not plain[6] & FLAG_COMPRESSED
    assert len(data) * 10 < len(plain)
    assert decode_all(data, secret=SECRET) == decode_all(plain) == [Frame("UpdateMetadata", 3, False, body)]


def test_small_bodies_are_not_compressed():
    assert not encode_frame("Ping", 1, {"a": 1}, compress_threshold=1024)[6] & FLAG_COMPRESSED


def test_chunked_encoding_is_byte_identical_to_json_dumps():
    bodies = [
        big_body(10_000),
        {"m": {str(i): {"isr": list(range(i % 7))} for i in range(5000)}, "x": [[1, 2]] * 3000},
        {1: "int key", "nested": {"deep": [{"a": list(range(3000))}]}, "t": (1, 2), "none": None},
        {"big_list_of_lists": [list(range(10)) for _ in range(3000)], "e": [], "d": {}},
    ]
    for body in bodies:
        expected = json.dumps(body, separators=(",", ":")).encode()
        assert encode_body(body, compress_threshold=None).data == expected


def test_encoding_a_big_body_is_sliced():
    steps = encode_body_steps(big_body(10_000), compress_threshold=None)
    count = 0
    try:
        while True:
            next(steps)
            count += 1
    except StopIteration as done:
        encoded = done.value
    assert isinstance(encoded, EncodedBody)
    # About 200 partitions per slice: 10,000 partitions take dozens of slices, not one.
    assert count >= 40


def test_encoded_body_can_be_reused_for_many_frames():
    encoded = encode_body(BODY)
    frames = decode_all(encode_frame("UpdateMetadata", 1, encoded) + encode_frame("UpdateMetadata", 2, encoded, secret=SECRET))
    assert [f.body for f in frames] == [BODY, BODY]


# --- property tests ------------------------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.text(max_size=20) | st.floats(
    allow_nan=False, allow_infinity=False
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30,
)
bodies = st.dictionaries(st.text(max_size=10), json_values, max_size=6)
apis = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=30)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    frames=st.lists(
        st.tuples(apis, st.integers(0, 2**32 - 1), st.booleans(), bodies, st.booleans()), min_size=1, max_size=4
    ),
    cuts=st.lists(st.integers(0, 10_000), max_size=6),
    secret=st.none() | st.just(SECRET),
    threshold=st.sampled_from([None, 0, 64]),
)
def test_any_frames_split_anywhere_round_trip(frames, cuts, secret, threshold):
    stream = b"".join(
        encode_frame(api, cid, body, secret=secret, is_response=resp, compress_threshold=threshold)
        for api, cid, resp, body, _ in frames
    )
    points = sorted({c % (len(stream) + 1) for c in cuts})
    decoder = FrameDecoder(secret=secret)
    out: list[Frame] = []
    start = 0
    for point in points + [len(stream)]:
        out += decoder.feed(stream[start:point])
        start = point
    decoder.eof()
    assert out == [Frame(api, cid, resp, json.loads(json.dumps(body))) for api, cid, resp, body, _ in frames]


def feed_everything(data: bytes, cuts: list[int], **kwargs) -> None:
    decoder = FrameDecoder(**kwargs)
    start = 0
    try:
        for point in sorted(c % (len(data) + 1) for c in cuts) + [len(data)]:
            for frame in decoder.feed(data[start:point]):
                assert isinstance(frame, Frame) and isinstance(frame.body, dict)
            start = point
        decoder.eof()
    except FrameError as err:
        assert err.reason and str(err)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300), cuts=st.lists(st.integers(0, 400), max_size=4), secret=st.none() | st.just(SECRET))
def test_random_bytes_give_frames_or_frame_error(data, cuts, secret):
    feed_everything(data, cuts, secret=secret, max_frame_bytes=4096)


@settings(max_examples=300, deadline=None)
@given(
    # one_of with a repeated branch: mostly well-formed headers, sometimes anything.
    flags=st.one_of(*[st.sampled_from([0, 1, 3, 8, 9, 11])] * 3, st.integers(0, 255)),
    api=st.one_of(*[apis.map(str.encode)] * 3, st.binary(max_size=12)),
    api_len=st.one_of(*[st.none()] * 3, st.integers(0, 255)),
    mac=st.sampled_from(["valid", "random"]),
    body=st.binary(max_size=200) | bodies.map(lambda b: json.dumps(b).encode()),
    compress=st.booleans(),
    length_delta=st.just(0) | st.integers(-3, 3),
    secret=st.none() | st.just(SECRET),
    cuts=st.lists(st.integers(0, 400), max_size=3),
)
def test_plausible_headers_with_random_content_give_frames_or_frame_error(
    flags, api, api_len, mac, body, compress, length_delta, secret, cuts
):
    """Random bytes rarely get past the magic check. These get past it and exercise the rest."""
    if compress:
        body = zlib.compress(body)
        flags |= FLAG_COMPRESSED
    header = struct.pack(">BBBIB", MAGIC, 1, flags, 7, len(api) if api_len is None else api_len) + api
    length = len(header) + (32 if flags & FLAG_MAC else 0) + len(body) + length_delta
    prefix = struct.pack(">I", max(0, length))
    tag = b""
    if flags & FLAG_MAC:
        tag = hmac.digest(SECRET, prefix + header + body, "sha256") if mac == "valid" else bytes(32)
    feed_everything(prefix + header + tag + body, cuts, secret=secret, max_frame_bytes=4096)


def test_module_is_pure():
    source = Path(wire.__file__).read_text()
    for forbidden in ("import asyncio", "import socket", "import time", "import random"):
        assert forbidden not in source


@pytest.mark.parametrize("body", [
    b'{"a":18446744073709551616,"b":-9223372036854775809}',  # beyond 64 bits: json's ints, not floats
    b'{"a":1,"a":2,"c":"caf\\u00e9","d":[1.5,5e-324,-0]}',
    b'{"big":' + b'[' + b",".join(b"[%d,2,7,[2,3,4],1,[2,3,4],7]" % p for p in range(40000)) + b"]}",  # over the GC-pause size (1 MiB)
])
def test_bodies_decode_to_what_json_reads(body):
    """The decoder parses with orjson where orjson gives json's value (adapters/runtime/jsonfast.py)."""
    decoder = FrameDecoder()
    (frame,) = decoder.feed(raw_frame(body))
    assert repr(frame.body) == repr(json.loads(body))
