"""Raw bytes to a node's port, for the tests that feed it what no client would send."""
from __future__ import annotations

import asyncio


async def exchange(port: int, data: bytes, *, wait: float = 3.0) -> bytes:
    """Send bytes on a fresh connection; everything received until the server closed (marked
    b"<closed>") or `wait` seconds of silence."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        received = b""
        while True:
            try:
                chunk = await asyncio.wait_for(reader.read(65536), wait)
            except asyncio.TimeoutError:
                return received
            if not chunk:
                return received + b"<closed>"
            received += chunk
    finally:
        writer.close()
