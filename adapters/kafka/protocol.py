"""Kafka request and response frames: headers, the served API versions, error codes (pure).

A Kafka frame is a 4-byte big-endian length, then a header, then the body. Request headers are
v1 (api key, api version, correlation id, nullable client id) or, for a flexible request version,
v2 (the same plus tagged fields). Response headers are v0 (correlation id) or v1 (plus tagged
fields) for flexible versions, except ApiVersions, whose response header is always v0 so that a
client can read it whatever version it asked for (KIP-511).
"""
from __future__ import annotations

import struct

import attrs

from adapters.kafka.codec import ProtocolError, decode, encode, is_flexible

_HEAD = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

MAX_REQUEST_BYTES = 104_857_600
"""Kafka's `socket.request.max.bytes` default: a larger length prefix closes the connection."""

# api key -> (name, lowest, highest served version); the highest versions are Kafka 2.4's
API_METADATA = 3
API_DESCRIBE_CONFIGS = 32
API_API_VERSIONS = 18
API_CREATE_TOPICS = 19
API_DELETE_TOPICS = 20
API_CREATE_PARTITIONS = 37
API_ELECT_LEADERS = 43
API_ALTER_CONFIGS = 33
API_INCREMENTAL_ALTER_CONFIGS = 44
SERVED: dict[int, tuple[str, int, int]] = {
    API_METADATA: ("Metadata", 0, 9),
    API_API_VERSIONS: ("ApiVersions", 0, 3),
    API_CREATE_TOPICS: ("CreateTopics", 0, 5),
    API_DELETE_TOPICS: ("DeleteTopics", 0, 4),
    API_DESCRIBE_CONFIGS: ("DescribeConfigs", 0, 2),
    API_CREATE_PARTITIONS: ("CreatePartitions", 0, 1),
    API_ELECT_LEADERS: ("ElectLeaders", 0, 2),
    API_ALTER_CONFIGS: ("AlterConfigs", 0, 1),
    API_INCREMENTAL_ALTER_CONFIGS: ("IncrementalAlterConfigs", 0, 1),
}

KAFKA_24_MAX_API_KEY = 47
"""OffsetDelete, the newest api of Kafka 2.4: a larger key is not a Kafka request at all."""

# Kafka's error codes (org.apache.kafka.common.protocol.Errors) used here
NONE = 0
UNKNOWN_SERVER_ERROR = -1
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
REQUEST_TIMED_OUT = 7
REPLICA_NOT_AVAILABLE = 9
INVALID_TOPIC_EXCEPTION = 17
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
NOT_CONTROLLER = 41
INVALID_REQUEST = 42
POLICY_VIOLATION = 44
TOPIC_DELETION_DISABLED = 73
PREFERRED_LEADER_NOT_AVAILABLE = 80
ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
ELECTION_NOT_NEEDED = 84
CLUSTER_AUTHORIZATION_FAILED = 31

ERROR_NAMES = {
    "UNKNOWN_SERVER_ERROR": UNKNOWN_SERVER_ERROR,
    "UNKNOWN_TOPIC_OR_PARTITION": UNKNOWN_TOPIC_OR_PARTITION,
    "LEADER_NOT_AVAILABLE": LEADER_NOT_AVAILABLE,
    "REQUEST_TIMED_OUT": REQUEST_TIMED_OUT,
    "INVALID_TOPIC_EXCEPTION": INVALID_TOPIC_EXCEPTION,
    "NOT_CONTROLLER": NOT_CONTROLLER,
    "INVALID_REQUEST": INVALID_REQUEST,
    "PREFERRED_LEADER_NOT_AVAILABLE": PREFERRED_LEADER_NOT_AVAILABLE,
    "ELIGIBLE_LEADERS_NOT_AVAILABLE": ELIGIBLE_LEADERS_NOT_AVAILABLE,
    "ELECTION_NOT_NEEDED": ELECTION_NOT_NEEDED,
}


@attrs.frozen
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: dict | None  # None: an api or version this broker does not serve


def request_header_version(api_key: int, api_version: int) -> int:
    name = SERVED[api_key][0]
    return 2 if is_flexible(name + "Request", api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_API_VERSIONS:
        return 0
    return 1 if is_flexible(SERVED[api_key][0] + "Response", api_version) else 0


def supported(api_key: int, api_version: int) -> bool:
    served = SERVED.get(api_key)
    return served is not None and served[1] <= api_version <= served[2]


def parse_request(payload: bytes) -> Request:
    """One request (the bytes after the length prefix). A served api at a served version is
    decoded in full; anything else keeps only the first header fields (`body` None), which is
    all a not-supported answer needs. Raises ProtocolError for bytes that are not a request."""
    if len(payload) < _HEAD.size:
        raise ProtocolError(f"request of {len(payload)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = _HEAD.unpack_from(payload)
    if not 0 <= api_key <= KAFKA_24_MAX_API_KEY:
        raise ProtocolError(f"api key {api_key} is not a Kafka 2.4 api")
    if not supported(api_key, api_version):
        return Request(api_key, api_version, correlation_id, None, None)
    header, pos = decode("RequestHeader", request_header_version(api_key, api_version), payload, whole=False)
    # bytes after the body are ignored, as Kafka 2.4's parser does: librdkafka 2.x ends its
    # all-topics Metadata v9 request with one byte more than the message holds
    body, _ = decode(SERVED[api_key][0] + "Request", api_version, payload, pos, whole=False)
    return Request(api_key, api_version, correlation_id, header.get("ClientId"), body)


def response_frame(request: Request, body: dict | bytes) -> bytes:
    """The length-prefixed response to `request` carrying `body` (a dict, or its encoding)."""
    name = SERVED[request.api_key][0]
    header = encode("ResponseHeader", response_header_version(request.api_key, request.api_version),
                    {"CorrelationId": request.correlation_id})
    data = header + (body if isinstance(body, bytes) else encode(name + "Response", request.api_version, body))
    return _I32.pack(len(data)) + data


def api_versions_body(error: int = NONE) -> dict:
    return {"ErrorCode": error, "ApiKeys": [{"ApiKey": k, "MinVersion": lo, "MaxVersion": hi}
                                            for k, (_, lo, hi) in sorted(SERVED.items())]}


def unsupported_frame(request: Request) -> bytes:
    """The answer to an api or version this broker does not serve.

    ApiVersions at a newer version gets KIP-511's answer: a v0 ApiVersions response with
    UNSUPPORTED_VERSION and the supported list, from which the client picks a version it shares.
    Any other request gets the correlation id and UNSUPPORTED_VERSION as an int16: the leading
    error code of the v0 error answers, and the connection stays open. A client only sends what
    ApiVersions listed, so this is for hand-written or misbehaving clients."""
    if request.api_key == API_API_VERSIONS:
        data = _I32.pack(request.correlation_id) + encode("ApiVersionsResponse", 0,
                                                          api_versions_body(UNSUPPORTED_VERSION))
    else:
        data = _I32.pack(request.correlation_id) + _I16.pack(UNSUPPORTED_VERSION)
    return _I32.pack(len(data)) + data


def request_frame(api_key: int, api_version: int, correlation_id: int, body: dict,
                  client_id: str | None = "kctl") -> bytes:
    """A length-prefixed request (for tests and tools that speak to a listener)."""
    name = SERVED[api_key][0]
    header = encode("RequestHeader", request_header_version(api_key, api_version),
                    {"RequestApiKey": api_key, "RequestApiVersion": api_version,
                     "CorrelationId": correlation_id, "ClientId": client_id})
    data = header + encode(name + "Request", api_version, body)
    return _I32.pack(len(data)) + data


def parse_response(api_key: int, api_version: int, payload: bytes) -> tuple[int, dict]:
    """(correlation id, body) of a response (the bytes after the length prefix)."""
    header, pos = decode("ResponseHeader", response_header_version(api_key, api_version), payload, whole=False)
    body, _ = decode(SERVED[api_key][0] + "Response", api_version, payload, pos)
    return header["CorrelationId"], body


__all__ = ["ProtocolError", "Request"]
