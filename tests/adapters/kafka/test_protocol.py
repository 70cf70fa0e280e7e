"""The spec-driven Kafka codec and the request/response framing, on bytes alone."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.kafka import codec
from adapters.kafka import protocol as K


def test_every_served_message_round_trips_at_every_version():
    for name, low, high in K.SERVED.values():
        for v in range(low, high + 1):
            for kind in ("Request", "Response"):
                data = codec.encode(name + kind, v, {})
                value, end = codec.decode(name + kind, v, data)
                assert end == len(data) and codec.encode(name + kind, v, value) == data, (name, kind, v)


def test_api_versions_v0_request_and_response_bytes_are_kafkas():
    # v0 request: header v1 (api key 18, version 0, correlation id 5, client id "c"), empty body
    assert K.request_frame(18, 0, 5, {}, client_id="c") == bytes.fromhex("0000000b" "0012" "0000" "00000005" "0001" "63")
    request = K.parse_request(K.request_frame(18, 0, 5, {}, client_id="c")[4:])
    frame = K.response_frame(request, {"ErrorCode": 0, "ApiKeys": [{"ApiKey": 3, "MinVersion": 0, "MaxVersion": 9}]})
    # correlation id, error 0, one api: key 3, 0..9 (no throttle time in v0)
    assert frame == bytes.fromhex("00000010" "00000005" "0000" "00000001" "0003" "0000" "0009")


def test_flexible_versions_use_compact_fields_and_tagged_sections():
    # Metadata v9: header v2 (client id stays a classic nullable string, then an empty tag section)
    frame = K.request_frame(3, 9, 1, {"Topics": [{"Name": "t"}], "AllowAutoTopicCreation": False})
    assert frame[4:] == bytes.fromhex("0003" "0009" "00000001" "0004" "6b63746c" "00"   # header v2
                                      "02" "0274" "00"                                   # one topic "t", its tags
                                      "00" "00" "00" "00")                               # three bools, tags
    request = K.parse_request(frame[4:])
    assert request.body["Topics"] == [{"Name": "t"}] and request.client_id == "kctl"
    # the response header is v1 (tags) for Metadata v9, but always v0 for ApiVersions (KIP-511)
    body = {"Brokers": [], "ClusterId": None, "ControllerId": 1, "Topics": []}
    assert K.response_frame(request, body)[4:10] == bytes.fromhex("00000001" "00" "00")
    av = K.parse_request(K.request_frame(18, 3, 2, {"ClientSoftwareName": "x", "ClientSoftwareVersion": "1"})[4:])
    assert K.response_frame(av, K.api_versions_body())[4:10] == bytes.fromhex("00000002" "0000")  # id, error


def test_unknown_tagged_fields_are_skipped():
    data = bytearray(codec.encode("ApiVersionsRequest", 3, {"ClientSoftwareName": "a", "ClientSoftwareVersion": "b"}))
    data[-1:] = bytes([1, 7, 2, 0xAB, 0xCD])  # one tagged field: tag 7, 2 bytes
    value, _ = codec.decode("ApiVersionsRequest", 3, bytes(data))
    assert value == {"ClientSoftwareName": "a", "ClientSoftwareVersion": "b"}


def test_kip_511_a_newer_api_versions_gets_a_v0_answer_with_the_supported_list():
    request = K.parse_request(struct.pack(">hhi", 18, 9, 42) + b"\x00\x00garbage of a future version")
    assert request.body is None
    frame = K.unsupported_frame(request)
    correlation_id, body = K.parse_response(18, 0, frame[4:])
    assert correlation_id == 42 and body["ErrorCode"] == K.UNSUPPORTED_VERSION
    assert {k["ApiKey"]: (k["MinVersion"], k["MaxVersion"]) for k in body["ApiKeys"]} == \
        {key: (lo, hi) for key, (_, lo, hi) in K.SERVED.items()}


def test_an_unserved_kafka_api_gets_unsupported_version_and_a_non_kafka_key_is_malformed():
    produce = K.parse_request(struct.pack(">hhi", 0, 7, 9) + b"\x00\x01x")
    assert produce.body is None
    assert K.unsupported_frame(produce) == struct.pack(">iih", 6, 9, K.UNSUPPORTED_VERSION)
    with pytest.raises(codec.ProtocolError, match="not a Kafka 2.4 api"):
        K.parse_request(struct.pack(">hhi", 300, 0, 9))
    with pytest.raises(codec.ProtocolError, match="shorter than a request header"):
        K.parse_request(b"\x00\x03\x00")


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(api=st.sampled_from(sorted(K.SERVED)), data=st.data())
def test_truncated_and_corrupted_requests_raise_protocol_error_only(api, data):
    name, low, high = K.SERVED[api]
    version = data.draw(st.integers(low, high))
    frame = K.request_frame(api, version, 1, {})[4:]
    cut = data.draw(st.integers(0, len(frame)))
    noise = data.draw(st.binary(max_size=16))
    for payload in (frame[:cut], frame[:8] + noise, frame[:cut] + noise):
        try:
            K.parse_request(payload)
        except codec.ProtocolError:
            pass
