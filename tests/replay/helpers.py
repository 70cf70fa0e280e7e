"""Builders for replay tests: generated journals, and planting faults into them."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from adapters.journal.writer import encode_record
from adapters.journal.format import list_segments

ROOT = Path(__file__).resolve().parents[2]


def generate_subprocess(out: Path, events: int, partitions: int, seed: int, segment_bytes: int = 60_000) -> dict:
    """Generate in a fresh process (PYTHONHASHSEED pinned to 0 by the generator itself, the
    seed Spark's Python workers use)."""
    proc = subprocess.run(
        [sys.executable, "-m", "replay.generate", "--out", str(out), "--events", str(events), "--partitions",
         str(partitions), "--seed", str(seed), "--segment-bytes", str(segment_bytes)],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def read_lines(path: Path) -> list[bytes]:
    data = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
    return data.split(b"\n")[:-1]


def write_lines(path: Path, lines: list[bytes]) -> None:
    data = b"".join(line + b"\n" for line in lines)
    if path.name.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    path.write_bytes(data)


def records(journal: Path):
    """(segment path, line number, record) for every line of a journal."""
    for seg in list_segments(journal):
        for n, raw in enumerate(read_lines(seg.path), 1):
            yield seg.path, n, json.loads(raw)


def rewrite(path: Path, line: int, record: dict) -> None:
    """Replace one record, with a valid checksum (a fault the checksum cannot catch)."""
    lines = read_lines(path)
    rest = {k: v for k, v in record.items() if k != "crc"}
    lines[line - 1] = encode_record(rest["seq"], rest["controller_id"], rest["controller_epoch"], rest["at"],
                                    rest["type"], rest["v"], rest["body"])[:-1]
    write_lines(path, lines)


def with_checksum(record: dict) -> bytes:
    """A record line (without "\\n") whose checksum matches, whatever the record holds: for
    faults the checksum cannot catch (a missing field, a wrong type, another key order)."""
    import zlib

    rest = json.dumps({k: v for k, v in record.items() if k != "crc"}, separators=(",", ":"),
                      ensure_ascii=False).encode()
    return b'{"crc":"%08x",' % zlib.crc32(rest) + rest[1:]


def flip_byte(path: Path, line: int, column: int = 60) -> None:
    lines = read_lines(path)
    raw = bytearray(lines[line - 1])
    raw[column] = ord("7") if raw[column] != ord("7") else ord("8")
    lines[line - 1] = bytes(raw)
    write_lines(path, lines)


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".lock"))
    return dst


def cut_at_clean_stop(journal: Path) -> Path:
    """Cut a journal (in place: give it a copy) just before its last clean stop's resignation
    (`ControllerResigned: the node is stopping`, adapters/node.py), so that it replays to the
    state the controller held when asked to stop. Records after the cut go, later segments too."""
    from adapters.node import STOPPING

    where = None
    for path, n, record in records(journal):
        body = record.get("body") or {}
        if record.get("type") == "event" and body.get("type") == "ControllerResigned" and body.get("reason") == STOPPING:
            where = (path, n)
    assert where is not None, f"{journal}: no clean stop journaled"
    path, n = where
    write_lines(path, read_lines(path)[:n - 1])
    for seg in list_segments(journal):
        if seg.path.name > path.name:
            seg.path.unlink()
    return journal


def env_without_hash_seed() -> dict:
    return {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
