"""`codec.digest` for the replay: the core's fast digest, with orjson and the collector paused.

The live loop records `codec.digest(commands)` (blake2b-128 of the canonical JSON of
`codec.encode_commands(commands)`; the fast computation is controller_core/digest.py). The
replay re-executes millions of events and digests them with a `Digester` of its own whose JSON
writer is orjson where it writes the same text (adapters/journal/canonical.py; optional on
executors), with the cyclic collector paused around each call (a big decision's encoding
allocates hundreds of thousands of small values; the core does not touch the collector).

The fold compares this digest with the journal's; on a mismatch it recomputes with
`codec.reference_digest` (the definition) before reporting anything. Tests check that both
agree with it on every decision of a generated journal.
"""
from __future__ import annotations

from controller_core import codec

from adapters.journal.canonical import canonical

from .collector import gc_paused

_DIGESTER = codec.digester(canonical)


def digest(commands) -> str:
    """Equal to `codec.digest(commands)` (and to `codec.reference_digest(commands)`)."""
    with gc_paused():
        return _DIGESTER.digest(commands)
