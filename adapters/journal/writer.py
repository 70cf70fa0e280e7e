"""The controller's write-ahead journal: checksummed JSON lines in size-bounded segment files.

The controller loop is the only writer. It appends a record for every event before acting on
it, then awaits `sync()` before executing the event's commands. Record bodies are plain
JSON-compatible dicts produced by the event/state codec; this module does not look inside them.

Record format (one line per record, read by `adapters.journal.format` and by Spark as-is)
---------------------------------------------------------------------------------------
A record is the compact JSON object (separators "," and ":", ASCII-only, no NaN)

    {"seq":S,"controller_id":C,"controller_epoch":E,"at":T,"type":"event","v":1,"body":{...}}

The writer computes H = zlib.crc32 of those exact bytes, written as 8 lowercase hex digits, and
stores the line `{"crc":"H",` + (the object without its leading "{") + "\\n". To verify, take the
line without "\\n", check that it starts with `{"crc":"` + 8 lowercase hex + `",`, and
recompute crc32 over "{" followed by everything from character index 18 (0-based) on; it must
equal H. Nothing is re-serialised, so key order and number formatting never matter to the check.
`adapters.journal.format.verify_line` implements exactly this and its docstring gives the Spark SQL
expression for the same test.

Fields: `seq` (gap-free, starts at 1, continues across reopenings), `controller_id`,
`controller_epoch`, `at` (ms since the epoch, from the caller), `type` ("snapshot", "event",
"effects", ...), `v` (schema version of the body), `body`.

Files
-----
`segment-<first seq, 20 digits>.jsonl`, compressed to `.jsonl.gz` once closed (gzip, which
Spark reads natively). When a `snapshot_provider` is configured, every segment starts with a
"snapshot" record so it can be replayed on its own. A new segment is started lazily, by the
first append after the current segment has reached `segment_bytes`: at that moment the
controller has applied every earlier record, so the snapshot it provides is exactly the state
the new segment's first event applies to. `roll()` asks for the same at the next append.

Durability
----------
`append()` only encodes and buffers (the buffer goes to the OS when it grows past 256 KiB).
`sync()` writes the buffer and then, by policy: "always" fsyncs on every call, "batch" shares one
fsync among all callers waiting at the same time (group commit; a call returns once every
record appended before it is durable), "never" stops after handing the bytes to the OS. fsyncs
run on one dedicated thread, FIFO, together with the sealing (fsync + close) of rolled segments,
so a segment is always durable before any later one is reported durable. Compression of closed
segments runs on a second thread: temp file, fsync, rename, unlink the plain file. If a crash
leaves both `.jsonl` and `.jsonl.gz` for a seq, the plain file is kept.

Failures
--------
Any OSError while writing or fsyncing (ENOSPC, EFBIG, EIO, ...) raises `JournalWriteError`
naming the file. The journal then refuses every further append and sync, so a later record can
never land after a lost one; what was already synced stays intact (partial bytes of the failed
write are truncated away when possible, and otherwise by the next `open`, as a torn tail).
Reopen the directory to continue (`reopen()`, after `probe_writable()` says there is room
again).

On open, the last segment is verified. A torn last line (no trailing newline, or the very last
line failing its checksum or JSON) is truncated and reported in `recovery_notes` and the log; a
bad line anywhere else raises `JournalCorruption` with the file and the 1-based line number.
"""
from __future__ import annotations

import asyncio
import errno
import fcntl
import gzip
import inspect
import json
import logging
import os
import shutil
import time
import weakref
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import orjson

from adapters.journal.format import (
    JournalCorruption,
    JournalError,
    list_segments,
    scan_segment,
    segment_name,
)
from adapters.runtime.jsonfast import loads as fast_loads

__all__ = [
    "Journal",
    "JournalStats",
    "JournalError",
    "JournalCorruption",
    "JournalWriteError",
    "encode_record",
    "probe_writable",
    "FSYNC_POLICIES",
]

log = logging.getLogger(__name__)

FSYNC_POLICIES = ("always", "batch", "never")
DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
_BUFFER_LIMIT = 256 * 1024
_LOCK_NAME = ".lock"
_PROBE_NAME = ".probe"
DEFAULT_PROBE_BYTES = 1024 * 1024

SnapshotProvider = Callable[[], "tuple[int, dict] | tuple[int, dict, int]"]

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode


class JournalWriteError(JournalError):
    """Writing or fsyncing the journal failed; the journal refuses further appends.

    `path` is the file concerned, `errno` the OS error number (None when not from the OS).
    """

    def __init__(self, message: str, path: str | os.PathLike | None = None, errno_: int | None = None):
        super().__init__(message)
        self.path = None if path is None else str(path)
        self.errno = errno_


def encode_record(
    seq: int, controller_id: int, controller_epoch: int, at: int, type: str, v: int, body: dict,
    floats: bool = True,
) -> bytes:
    """One complete record line, "\\n" included (see the module docstring for the rule).
    `floats=False`: the caller vouches that `body` holds no float (the codec's bodies:
    `controller_core.codec.FLOAT_FREE`), which spares the walk that tells NaN from None."""
    record = {
        "seq": seq,
        "controller_id": controller_id,
        "controller_epoch": controller_epoch,
        "at": at,
        "type": type,
        "v": v,
        "body": body,
    }
    # orjson writes the same compact JSON twenty times faster (a 10,000-partition snapshot or
    # ControllerElected is megabytes); its output is UTF-8, so a record with a non-ASCII
    # character goes through json for the ASCII-only form the format promises
    try:
        rest = orjson.dumps(record)
    except (TypeError, orjson.JSONEncodeError):
        rest = b""
    # orjson also writes NaN and infinities as null, which the format forbids: where a null
    # appears, make sure no float is behind it (codec bodies hold no floats at all)
    if not rest or not rest.isascii() or (floats and b"null" in rest and _has_float(body)):
        rest = _dumps(record).encode("ascii")
    return b'{"crc":"%08x",' % zlib.crc32(rest) + rest[1:] + b"\n"


def _has_float(value) -> bool:
    stack = [value]
    while stack:
        x = stack.pop()
        t = type(x)
        if t is float:
            return True
        if t is dict:
            stack.extend(x.values())
        elif t is list or t is tuple:
            stack.extend(x)
    return False


@dataclass(frozen=True, slots=True)
class JournalStats:
    records: int  # records appended since open (snapshot heads included)
    bytes: int  # bytes appended since open
    last_seq: int  # seq of the last appended record (0 when the journal is empty)
    durable_seq: int  # every record up to here is fsynced
    last_fsync_ms: float | None  # duration of the most recent fsync
    fsyncs: int  # fsyncs run since open
    fsync_ms_total: float
    segments_rolled: int  # segments started since open
    segment: str | None  # name of the current segment file


def _describe(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "no space left on device (ENOSPC)"
    if exc.errno == errno.EFBIG:
        return "file size limit exceeded (EFBIG)"
    if exc.errno == errno.EDQUOT:
        return "disk quota exceeded (EDQUOT)"
    name = errno.errorcode.get(exc.errno or 0, "?")
    return f"{exc.strerror or exc} ({name})"


def probe_writable(directory: str | os.PathLike, size: int = DEFAULT_PROBE_BYTES) -> None:
    """Check that `size` bytes can be written and fsynced in `directory` now: write a hidden
    scratch file (readers skip names starting with "."), fsync it, remove it.

    Raises `JournalWriteError` naming the directory and the OS error (a full disk, a file size
    limit, a read-only remount ...). Used to decide when a journal that failed may be reopened,
    without putting anything into the journal itself."""
    path = Path(directory) / _PROBE_NAME
    block = b"\0" * min(size, 64 * 1024)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            written = 0
            while written < size:
                written += os.write(fd, block[: size - written])
            os.fsync(fd)
        finally:
            os.close(fd)
            try:
                os.unlink(path)
            except OSError:
                pass
    except OSError as exc:
        raise JournalWriteError(f"journal directory {directory} is not writable: {_describe(exc)}",
                                path, exc.errno) from exc


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Journal:
    """An open journal directory. Not thread-safe: one owner (the controller loop) calls it."""

    def __init__(self, *_args, **_kwargs):
        raise TypeError("use Journal.open(directory, controller_id, ...)")

    # ------------------------------------------------------------------------------- opening

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike,
        controller_id: int,
        *,
        fsync: str = "batch",
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        compress_closed: bool = True,
        snapshot_provider: SnapshotProvider | None = None,
        cluster_id: str | None = None,
    ) -> "Journal":
        """Open (creating if needed) the journal in `directory` for appending.

        `cluster_id` (the cluster's `/cluster/id`) goes first into the body of every snapshot
        head, so that a replay can tell the journals of different clusters apart.

        Verifies the last segment, truncates a torn tail (see `recovery_notes`), and raises
        `JournalCorruption` for damage anywhere else in it. Takes an exclusive lock on the
        directory: a second writer gets `JournalError`.
        """
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"fsync must be one of {FSYNC_POLICIES}, not {fsync!r}")
        if segment_bytes <= 0:
            raise ValueError("segment_bytes must be positive")
        self = object.__new__(cls)
        self._init(Path(directory), controller_id, fsync, segment_bytes, compress_closed, snapshot_provider)
        self.cluster_id = cluster_id
        try:
            self._recover()
        except BaseException:
            self._release_lock()
            self._io.shutdown(wait=True)
            self._gz.shutdown(wait=True)
            raise
        return self

    def reopen(self) -> "Journal":
        """Close this journal (quietly, if it has failed) and open its directory again with the
        same settings and snapshot provider. The torn tail a failed write may have left is
        truncated by the open, and the next append starts a new segment."""
        try:
            self.close()
        except JournalError:
            pass  # already reported when it happened
        journal = Journal.open(self._dir, self._controller_id, fsync=self._policy,
                               segment_bytes=self._segment_bytes, compress_closed=self._compress,
                               snapshot_provider=self.snapshot_provider, cluster_id=self.cluster_id)
        journal.roll()  # a segment at a file size limit cannot take more
        return journal

    @property
    def snapshot_provider(self) -> "SnapshotProvider | None":
        """What gives the snapshot head of each new segment (None: no heads)."""
        held = self._snapshot_provider
        return held() if isinstance(held, weakref.WeakMethod) else held

    @snapshot_provider.setter
    def snapshot_provider(self, provider: "SnapshotProvider | None") -> None:
        # A bound method is held weakly: its object (the controller loop) holds this journal,
        # and a strong reference back made a cycle that kept a dropped node's controller state
        # for the cyclic garbage collector (issue 16). A journal outliving its loop writes no
        # snapshot heads, as one opened without a provider.
        self._snapshot_provider = weakref.WeakMethod(provider) if inspect.ismethod(provider) else provider

    @property
    def failure(self) -> "JournalWriteError | None":
        """The write or fsync failure that made this journal refuse appends (None: usable)."""
        return self._failure or self._bg_failure

    def _init(self, directory, controller_id, fsync, segment_bytes, compress_closed, provider):
        directory.mkdir(parents=True, exist_ok=True)
        self._dir = directory
        self._controller_id = controller_id
        self._policy = fsync
        self._segment_bytes = segment_bytes
        self._compress = compress_closed
        self.snapshot_provider = provider
        self.snapshot_floats = True  # False: the provider's bodies hold no float (see `encode_record`)
        self.recovery_notes: list[str] = []

        self._lock_fd = os.open(directory / _LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise JournalError(f"journal {directory} is already open in another writer") from None

        self._io = ThreadPoolExecutor(1, thread_name_prefix="journal-fsync")
        self._gz = ThreadPoolExecutor(1, thread_name_prefix="journal-gzip")
        self._compressions: list[Future] = []

        self._fd: int | None = None  # current segment, opened lazily when nothing is to continue
        self._path: Path | None = None
        self._seg_size = 0  # bytes of the current segment already handed to the OS
        self._seg_records = 0  # records in the current segment (written or buffered)
        self._roll_requested = False
        self._prepared_snapshot = None  # see prepare_snapshot

        self._buf: list[bytes] = []
        self._buf_bytes = 0
        self._next_seq = 1
        self._written_seq = 0  # handed to the OS
        self._durable_seq = 0  # fsynced
        self._dir_dirty = False  # a segment file was created and the directory not yet fsynced

        self._failure: JournalWriteError | None = None
        self._bg_failure: JournalWriteError | None = None  # set by the fsync thread
        self._closed = False
        self._batch_task: asyncio.Future | None = None

        self._records = 0
        self._bytes = 0
        self._fsyncs = 0
        self._fsync_ms_total = 0.0
        self._last_fsync_ms: float | None = None
        self._rolled = 0

    def _note(self, message: str) -> None:
        self.recovery_notes.append(message)
        log.warning("journal %s: %s", self._dir, message)

    def _recover(self) -> None:
        # Leftovers of an interrupted compression: the temp file is never authoritative, and a
        # .gz next to its plain file may be incomplete in spirit (the plain file was not yet
        # removed), so the plain file wins.
        for entry in os.listdir(self._dir):
            if entry.startswith(".segment-") and entry.endswith(".tmp"):
                os.unlink(self._dir / entry)
                self._note(f"removed {entry} left by an interrupted compression")
        for entry in os.listdir(self._dir):
            if entry.startswith("segment-") and entry.endswith(".jsonl.gz"):
                plain = self._dir / entry[: -len(".gz")]
                if plain.exists():
                    os.unlink(self._dir / entry)
                    self._note(f"removed {entry}: {plain.name} was not yet replaced when compression stopped")

        segments = list_segments(self._dir)
        if not segments:
            return
        last = segments[-1]
        # (the whole last segment is checked: up to segment_bytes of records, parsed by orjson
        # where it gives json's values, as the replay reads them)
        scan = scan_segment(last.path, tolerate_torn_tail=True, loads=fast_loads)
        if scan.last_record is not None:
            owner = scan.last_record["controller_id"]
            if owner != self._controller_id:
                raise JournalError(
                    f"journal {self._dir} belongs to controller {owner}, not {self._controller_id}"
                )
        self._next_seq = last.first_seq + scan.records
        self._written_seq = self._durable_seq = self._next_seq - 1
        if last.compressed:
            self._roll_requested = True  # a sealed segment: the next append starts a new one
        else:
            fd = os.open(last.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
            try:
                if scan.torn is not None:
                    size = os.fstat(fd).st_size
                    self._note(
                        f"truncated torn tail of {last.path.name} at line {scan.torn.line} "
                        f"(byte {scan.torn.offset}, {size - scan.torn.offset} bytes dropped): {scan.torn.reason}"
                    )
                    os.ftruncate(fd, scan.good_bytes)
                # the previous writer may have died before fsyncing (or run with fsync="never"):
                # make what is there durable, so that durable_seq starts out true
                os.fsync(fd)
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
            self._path = last.path
            self._seg_size = scan.good_bytes
            self._seg_records = scan.records
        if self._compress:
            for seg in segments[:-1]:
                if not seg.compressed:
                    self._compressions.append(self._gz.submit(self._compress_segment, seg.path))

    # ------------------------------------------------------------------------------- appending

    @property
    def policy(self) -> str:
        """The fsync policy: "always", "batch" or "never"."""
        return self._policy

    @property
    def directory(self) -> Path:
        return self._dir

    @property
    def controller_id(self) -> int:
        return self._controller_id

    @property
    def last_seq(self) -> int:
        """Seq of the last appended record (0 for an empty journal)."""
        return self._next_seq - 1

    @property
    def durable_seq(self) -> int:
        """Every record with a seq up to this one has been fsynced."""
        return self._durable_seq

    def append(self, type: str, body: dict, *, controller_epoch: int, at: int, v: int = 1,
               floats: bool = True) -> int:
        """Encode and buffer one record; return its seq. Durable only after `sync()`.
        (`floats`: see `encode_record`.)

        Raises TypeError/ValueError (and consumes no seq) when `body` is not JSON-compatible,
        and `JournalWriteError` when the journal has failed or a write fails now.
        """
        self._check_usable()
        line = encode_record(self._next_seq, self._controller_id, controller_epoch, at, type, v, body, floats)
        new_segment = (
            self._fd is None
            or self._roll_requested
            or self._seg_size + self._buf_bytes >= self._segment_bytes
        )
        if type == "effects" and self._fd is not None and self._seg_records:
            # An effects record never starts a segment: it describes an event already stepped,
            # and the replay cuts at a snapshot by the effects records before it (replay/plan.py),
            # so the segment rolls at the next event instead (the loop appends the effects of
            # every stepped event first).
            new_segment = False
        if new_segment and self._fd is not None and self._seg_records == 0:
            new_segment = self._roll_requested = False  # the current segment is empty: use it
        if new_segment:
            self._start_segment(at)
        elif self._seg_records == 0 and self.snapshot_provider is not None:
            # a segment reopened empty (its first write was torn) still needs its head
            self._buffer(self._snapshot_line(at))
        else:
            return self._buffer(line)
        if self._seg_records:  # a snapshot head took this seq: encode the record after it
            line = encode_record(self._next_seq, self._controller_id, controller_epoch, at, type, v, body, floats)
        return self._buffer(line)

    def rolls_next(self) -> bool:
        """Whether the next `append` of an event starts a segment (and so asks for a snapshot
        head); an "effects" record never does."""
        return (self._fd is None or self._roll_requested or self._seg_size + self._buf_bytes >= self._segment_bytes
                or (self._seg_records == 0 and self.snapshot_provider is not None))

    def prepare_snapshot(self, result) -> None:
        """Give the snapshot head of the next segment now (what `snapshot_provider` would return),
        so that a caller can compute a large one off its event loop; used by the next append."""
        self._prepared_snapshot = result

    def _snapshot_line(self, at: int) -> bytes:
        result, self._prepared_snapshot = self._prepared_snapshot, None
        if result is None:
            result = self.snapshot_provider()
        epoch, body = result[0], result[1]
        v = result[2] if len(result) > 2 else 1
        if self.cluster_id is not None:
            # first in the body: a reader finds it in the line's first few hundred bytes
            body = {"cluster_id": self.cluster_id, **{k: x for k, x in body.items() if k != "cluster_id"}}
        return encode_record(self._next_seq, self._controller_id, epoch, at, "snapshot", v, body, self.snapshot_floats)

    def _buffer(self, line: bytes) -> int:
        seq = self._next_seq
        self._buf.append(line)
        self._buf_bytes += len(line)
        self._seg_records += 1
        self._next_seq = seq + 1
        self._records += 1
        self._bytes += len(line)
        if self._buf_bytes >= _BUFFER_LIMIT:
            self._flush()
        return seq

    def roll(self) -> None:
        """Start a new segment (with a fresh snapshot head) at the next append."""
        self._check_usable()
        self._roll_requested = True

    def _start_segment(self, at: int) -> None:
        head = self._snapshot_line(at) if self.snapshot_provider is not None else None
        if self._fd is not None:
            self._flush()
            old_fd, old_path = self._fd, self._path
            self._fd = self._path = None
            self._io.submit(self._seal, old_fd, old_path)
        path = self._dir / segment_name(self._next_seq)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise self._fail(exc, path, "create") from exc
        self._fd, self._path = fd, path
        self._seg_size = 0
        self._seg_records = 0
        self._roll_requested = False
        self._dir_dirty = True
        self._rolled += 1
        if head is not None:
            self._buffer(head)

    def _flush(self) -> None:
        """Hand the buffer to the OS. On failure, cut the partial write back off if we can."""
        if not self._buf:
            return
        data = b"".join(self._buf) if len(self._buf) > 1 else self._buf[0]
        view = memoryview(data)
        done = 0
        try:
            while done < len(data):
                done += os.write(self._fd, view[done:])
        except OSError as exc:
            if done:
                try:
                    os.ftruncate(self._fd, self._seg_size)
                except OSError:
                    pass  # the next open truncates it as a torn tail
            raise self._fail(exc, self._path, "write") from exc
        finally:
            view.release()
        self._seg_size += len(data)
        self._written_seq = self._next_seq - 1
        self._buf.clear()
        self._buf_bytes = 0

    def _fail(self, exc: OSError, path: Path | None, action: str) -> JournalWriteError:
        err = JournalWriteError(
            f"journal {action} failed on {path}: {_describe(exc)}; records up to seq "
            f"{self._durable_seq} are durable, the journal refuses further appends",
            path,
            exc.errno,
        )
        if self._failure is None:
            self._failure = err
        self._buf.clear()
        self._buf_bytes = 0
        return err

    def _check_usable(self) -> None:
        if self._closed:
            raise JournalError(f"journal {self._dir} is closed")
        failure = self._failure or self._bg_failure
        if failure is not None:
            self._failure = failure
            raise JournalWriteError(
                f"journal {self._dir} refuses appends after an earlier failure: {failure}",
                failure.path,
                failure.errno,
            )

    # ------------------------------------------------------------------------------- durability

    def _durability_job(self, fd: int, path: Path, dir_sync: bool) -> None:
        """Run on the fsync thread. FIFO with `_seal`, so earlier segments are already sealed."""
        if self._bg_failure is not None:
            raise self._bg_failure
        try:
            if dir_sync:
                _fsync_dir(self._dir)
            start = time.perf_counter()
            os.fsync(fd)
        except OSError as exc:
            self._bg_failure = self._fail_bg(exc, path, "fsync")
            raise self._bg_failure from exc
        self._record_fsync(time.perf_counter() - start)

    def _record_fsync(self, seconds: float) -> None:
        ms = seconds * 1000.0
        self._last_fsync_ms = ms
        self._fsyncs += 1
        self._fsync_ms_total += ms

    def _fail_bg(self, exc: OSError, path: Path | None, action: str) -> JournalWriteError:
        return JournalWriteError(
            f"journal {action} failed on {path}: {_describe(exc)}; the journal refuses further appends",
            path,
            exc.errno,
        )

    def _seal(self, fd: int, path: Path) -> None:
        """Run on the fsync thread: make a rolled segment durable, close it, queue compression."""
        try:
            if self._bg_failure is None:
                start = time.perf_counter()
                os.fsync(fd)
                self._record_fsync(time.perf_counter() - start)
        except OSError as exc:
            self._bg_failure = self._fail_bg(exc, path, "fsync")
            return
        finally:
            os.close(fd)
        if self._compress and self._bg_failure is None:
            pending = [f for f in self._compressions if not f.done()]
            pending.append(self._gz.submit(self._compress_segment, path))
            self._compressions = pending

    def _submit_durability(self) -> tuple[Future, int]:
        dir_sync, self._dir_dirty = self._dir_dirty, False
        covered = self._written_seq
        return self._io.submit(self._durability_job, self._fd, self._path, dir_sync), covered

    def _finish(self, covered: int) -> None:
        if covered > self._durable_seq:
            self._durable_seq = covered

    def _raise_failure(self, exc: BaseException) -> None:
        if isinstance(exc, JournalWriteError):
            if self._failure is None:
                self._failure = exc
            raise exc
        raise exc

    async def sync(self) -> None:
        """Make every record appended before this call durable, according to the fsync policy."""
        self._check_usable()
        target = self._next_seq - 1
        self._flush()
        if self._policy == "never" or self._fd is None:
            return
        if self._policy == "always":
            if self._durable_seq < target:
                job, covered = self._submit_durability()
                try:
                    await asyncio.wrap_future(job)
                except JournalWriteError as exc:
                    self._raise_failure(exc)
                self._finish(covered)
            return
        while self._durable_seq < target:  # batch: join the fsync in flight, or start one
            if self._failure is not None:
                self._check_usable()
            task = self._batch_task
            if task is None:
                task = self._batch_task = asyncio.ensure_future(self._batch_fsync())
            try:
                await asyncio.shield(task)
            except JournalWriteError as exc:
                self._raise_failure(exc)

    async def _batch_fsync(self) -> None:
        try:
            self._check_usable()  # closed or failed since the waiter scheduled this
            job, covered = self._submit_durability()
            await asyncio.wrap_future(job)
            self._finish(covered)
        finally:
            self._batch_task = None

    def sync_blocking(self) -> None:
        """`sync()` for callers without an event loop (tools, tests, shutdown paths)."""
        self._check_usable()
        target = self._next_seq - 1
        self._flush()
        if self._policy == "never" or self._fd is None or self._durable_seq >= target:
            return
        job, covered = self._submit_durability()
        try:
            job.result()
        except JournalWriteError as exc:
            self._raise_failure(exc)
        self._finish(covered)

    # ------------------------------------------------------------------------------- compression

    def _compress_segment(self, path: Path) -> None:
        """Run on the gzip thread. A failure leaves the plain file, which stays authoritative."""
        final = path.with_name(path.name + ".gz")
        tmp = path.with_name("." + path.name + ".gz.tmp")
        try:
            with open(path, "rb") as src, open(tmp, "wb") as raw:
                with gzip.GzipFile(filename=path.name, mode="wb", fileobj=raw, compresslevel=6, mtime=0) as gz:
                    shutil.copyfileobj(src, gz, 1024 * 1024)
                raw.flush()
                os.fsync(raw.fileno())
            os.rename(tmp, final)
            _fsync_dir(self._dir)
            os.unlink(path)
            _fsync_dir(self._dir)
        except OSError as exc:
            log.warning("journal %s: could not compress %s (%s); keeping it plain", self._dir, path.name, _describe(exc))
            try:
                os.unlink(tmp)
            except OSError:
                pass

    # ------------------------------------------------------------------------------- closing

    def close(self, *, wait_for_compression: bool = True) -> None:
        """Flush, fsync and close the current segment, then release the directory.

        Idempotent. Raises `JournalWriteError` if the final write or fsync fails (the directory
        is released anyway). The current segment stays plain so the next open continues it.
        """
        if self._closed:
            return
        error: BaseException | None = None
        try:
            if self._failure is None and self._bg_failure is None:
                self._flush()
        except JournalWriteError as exc:
            error = exc
        self._closed = True
        if self._fd is not None:
            fd, path, dir_sync = self._fd, self._path, self._dir_dirty
            self._fd = None

            def seal_current() -> None:
                try:
                    if self._bg_failure is None:
                        if dir_sync:
                            _fsync_dir(self._dir)
                        os.fsync(fd)
                except OSError as exc:
                    self._bg_failure = self._fail_bg(exc, path, "fsync")
                finally:
                    os.close(fd)

            self._io.submit(seal_current)
        self._io.shutdown(wait=True)
        if error is None and self._failure is None and self._bg_failure is not None:
            error = self._bg_failure
        elif error is None and self._bg_failure is None and self._failure is None:
            self._durable_seq = self._written_seq
        if wait_for_compression:
            for fut in list(self._compressions):
                fut.result()
        self._gz.shutdown(wait=wait_for_compression)
        self._release_lock()
        if error is not None:
            raise error

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor drops the flock
            self._lock_fd = None

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # ------------------------------------------------------------------------------- metrics

    def stats(self) -> JournalStats:
        return JournalStats(
            records=self._records,
            bytes=self._bytes,
            last_seq=self._next_seq - 1,
            durable_seq=self._durable_seq,
            last_fsync_ms=self._last_fsync_ms,
            fsyncs=self._fsyncs,
            fsync_ms_total=self._fsync_ms_total,
            segments_rolled=self._rolled,
            segment=self._path.name if self._path is not None else None,
        )

    def __repr__(self) -> str:
        return f"<Journal {self._dir} controller={self._controller_id} last_seq={self.last_seq} fsync={self._policy}>"
