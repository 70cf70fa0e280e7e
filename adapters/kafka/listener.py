"""Kafka clients on a node's PLAINTEXT port: one asyncio task per connection.

The port is shared with the control channel. `adapters.control.transport.ControlServer` looks at the fifth
byte of each new connection: a control frame has the magic 0xC7 there, a Kafka request the high
byte of its api key, 0 for every Kafka api. Kafka connections are handed to `serve`.

Requests on one connection are answered one at a time and in order, as a Kafka broker does
(it mutes a connection while a request is in flight). A length outside 8..`MAX_REQUEST_BYTES`,
or a served request whose header or body does not decode, closes the connection with one
warning line (Kafka's InvalidRequestException); an api or version this broker does not serve is
answered (see `protocol.unsupported_frame`) and the connection stays open; an api key Kafka 2.4
does not have is malformed.
"""
from __future__ import annotations

import asyncio
import logging
import struct

from adapters.kafka import protocol as K
from adapters.kafka.apis import KafkaApis
from adapters.kafka.codec import ProtocolError

log = logging.getLogger("kctl.kafka")

_LEN = struct.Struct(">i")


class _Malformed(Exception):
    pass


class _Buffered:
    """A StreamReader with bytes already read in front of it."""

    def __init__(self, reader: asyncio.StreamReader, first: bytes):
        self.reader = reader
        self.buf = bytearray(first)

    async def exactly(self, n: int) -> bytes | None:
        while len(self.buf) < n:
            data = await self.reader.read(max(65536, n - len(self.buf)))
            if not data:
                if self.buf:
                    raise _Malformed(f"connection closed inside a request ({len(self.buf)} of {n} bytes)")
                return None
            self.buf += data
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out


async def serve(apis: KafkaApis, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, first: bytes,
                peer: str) -> None:
    """Answer Kafka requests on one connection until the client closes it or sends garbage.
    The caller closes the writer."""
    stream = _Buffered(reader, first)
    try:
        while True:
            head = await stream.exactly(4)
            if head is None:
                return
            (size,) = _LEN.unpack(head)
            if size < 8 or size > K.MAX_REQUEST_BYTES:
                raise _Malformed(f"request length {size} is outside 8..{K.MAX_REQUEST_BYTES}")
            payload = await stream.exactly(size)
            if payload is None:
                raise _Malformed("connection closed inside a request")
            try:
                request = K.parse_request(payload)
            except ProtocolError as err:
                raise _Malformed(f"{err} (first bytes {payload[:48].hex()})") from None
            if request.body is None:
                log.info("kafka listener: %s sent api %d v%d, which is not served; answered UNSUPPORTED_VERSION",
                         peer, request.api_key, request.api_version)
                writer.write(K.unsupported_frame(request))
            else:
                try:
                    body = await apis.handle(request)
                    data = K.response_frame(request, body)
                except Exception:  # a handler bug must not kill the listener: the client sees a closed socket
                    log.exception("kafka listener: %s v%d from %s failed", K.SERVED[request.api_key][0],
                                  request.api_version, peer)
                    return
                writer.write(data)
            await writer.drain()
    except _Malformed as err:
        log.warning("kafka listener: closing connection from %s: malformed request: %s", peer, err)
    except (ConnectionError, OSError) as err:
        log.debug("kafka listener: connection from %s lost: %s", peer, err)
