"""The digest of a decision's commands, computed fast: what the live loop journals and the
replay checks.

Who uses it: the controller loop (adapters/controller/loop.py) writes `codec.digest(commands)`
into each event's "effects" record; the replay (replay/fold.py, through replay/digest.py)
re-executes the event and compares. `codec.digest` is a `Digester` of this module.

The definition is `codec.reference_digest`: hex blake2b-128 of
`codec.canonical_json(codec.encode_commands(commands))`, the whole text built in one piece. A
`Digester` gives the same bytes faster. Most decisions are small (an ISR change: one
UpdateMetadata per broker, all sharing one `partitions` tuple and one `live_brokers` tuple), and
their text is mostly the same broker list repeated in every command and in every decision. So:

- a decision made only of broker requests (`SendUpdateMetadata`, `SendLeaderAndIsr`) is written
  a command at a time as its int fields (`%d`) followed by the text of its tuple fields, which is
  made once per distinct set of tuples in the decision; within it, the broker list's text is
  made once per *set of broker objects* across decisions, and the other tuples are encoded by
  the codec (which is told to skip the broker list);
- any other decision is encoded by the codec (which encodes a shared tuple once, as one list
  object) and each command's dict is written in key order with a list met twice serialised once;
  its broker requests are written as above;
- a whole-cluster decision's columns are written as they are: a request's partitions held as
  a `PartitionViews` and a write command's writes held as a `PartitionWrites`, from 512 rows
  on, become their text as a byte matrix, one row per partition (`_matrix_text`), never as
  values; a probe checks at construction that this gives the codec's text, else the codec's
  path is taken;
- within one release (the requests one `emit_outbox` gathered from the same columns), a
  partition's text is made once: UpdateMetadata sends every partition and LeaderAndIsr each
  broker's share again, and a row differs between them only in its leader and its `is_new`
  flag, so the largest request's rows are written and the others gather theirs from them
  (`_SharedRows`; 0.6x the digest of a whole-cluster release of the million-event journal).

The broker-list cache is keyed by the identities of the `BrokerInfo` objects and holds them, so
an id in it cannot be reused by another object while the entry lives; the objects are frozen, so
the same objects always give the same text. (Keying by value would be unsound: `port=True`
equals `port=1` but encodes differently.) The caches are plain dicts whose entries are only ever
added or dropped whole, so threads may share them (the loop digests in a worker thread): a race
costs a recomputation, never a wrong text.

This module does not import the codec (the codec builds its `Digester` from its own functions),
and does not touch the garbage collector (see codec.py): callers that digest big decisions pause
it themselves, as the replay does.
"""
from __future__ import annotations

import hashlib
import json
import operator
from typing import Any, Callable, Iterable

import attrs
import numpy as np

from . import commands as C
from .codec_tables import VERSIONS
from .columns import _cut
from .partition_views import PartitionViews, distinct_rows
from .partition_writes import PartitionWrites
from .values import TopicPartition

__all__ = ["Digester"]

Canonical = Callable[[Any], str]
"""A JSON writer giving the codec's canonical text (sorted keys, no spaces, ASCII only)."""

_INTS = ("broker_epoch", "broker_id", "controller_epoch")  # sorted
_SKIPPED: list = []  # stands in for the encoded broker list, whose text is cached (see _rest_text)
_BROKERS_CAP = 256
_HEADS_CAP = 4096
_JOINED = 1 << 14
"""Below this many bytes per shared text, a decision's request texts are joined and hashed at
once; above, fed to the hash one piece at a time."""
_VIEWS_FROM_COLUMNS = 512
"""From this many partitions, a request's partitions (and a write command's writes) are written
from the columns (_views_text, _writes_text; ~0.2 ms fixed cost, then ~1 us a partition against
~2 us for making and encoding the values)."""
_NO_WRITES = '"writes":[]}'
_EMPTY = hashlib.blake2b(b"[]", digest_size=16).hexdigest()


def _key_text(name: str) -> str:
    return json.dumps(name, ensure_ascii=True)


class _Request:
    """How to write one broker-request class directly: its int fields, which sort first, through
    `head` (a %-format), then the text of its other fields and `tail` ("type" and "v")."""

    __slots__ = ("brokers_field", "ints", "head", "heads", "rest", "rest_steps", "tail", "brokers", "fields")

    def __init__(self, cls: type, brokers_field: str, rest: list[str], fields: dict | None = None):
        self.brokers_field = brokers_field
        self.ints = operator.attrgetter(*_INTS)  # a tuple of the int fields' values, in key order
        self.head = "{" + ",".join(_key_text(n) + ":%d" for n in _INTS) + ","
        # the head's text by its ints (exact ints: `_request_parts` checks them first)
        self.heads: dict[tuple, bytes] = {}
        self.rest = operator.attrgetter(*rest)
        # (name, key text, is the broker list) of the other fields, in key order
        self.rest_steps = tuple((n, ("," if k else "") + _key_text(n) + ":", n == brokers_field)
                                for k, n in enumerate(rest))
        self.tail = f',"type":{_key_text(cls.__name__)},"v":{VERSIONS[cls.__name__]}}}'
        # the broker list's text across decisions: ids of the BrokerInfo objects -> (the objects,
        # text); holding the objects keeps the ids in a key theirs (see the module docstring)
        self.brokers: dict[tuple, tuple[tuple, str]] = {}
        # the codec's encoding of each other tuple field, one field at a time (None: the whole
        # command is encoded, as the codec encodes it, and the fields taken from it)
        self.fields = fields

    @classmethod
    def plan(cls, command_class: type, brokers_field: str,
             field_encoder: Callable[[type, str], Callable] | None = None) -> "_Request | None":
        """None if the class no longer has the shape this relies on (the three int fields
        sorting before two or more tuple fields, `partitions` and the broker list among them,
        every field sorting before "type"): the generic path then digests it, so a changed
        command class cannot change a digest."""
        names = sorted(f.name for f in attrs.fields(command_class))
        rest = names[len(_INTS):]
        if tuple(names[:len(_INTS)]) != _INTS or len(rest) < 2 or "partitions" not in rest \
                or brokers_field not in rest or any(n in _INTS for n in rest) \
                or command_class.__name__ not in VERSIONS or not all(n < "type" for n in names):
            return None
        fields = None
        if field_encoder is not None:
            fields = {n: field_encoder(command_class, n) for n in rest}
            if None in fields.values():
                fields = None
        return cls(command_class, brokers_field, rest, fields)


def _views_text(views: PartitionViews, canonical: Canonical, shared: "_SharedRows | None" = None) -> str | None:
    """The codec's canonical text of a `PartitionViews` (a list of `PartitionView`s, each the
    positional list `[tp, leader, leader_epoch, [isr], controller_epoch, zk_version, [replicas]]`,
    with `[adding], [removing], is_new` after it when one of them is not its default), written
    from the columns without making the views (see `_matrix_text`). None if a partition number
    is not exactly an int (a bool would be written `true`: the codec's path says so). With
    `shared`, each row's partition and the fields after its leader are taken from another request
    of the same release that holds the row, if one does (see `_SharedRows`)."""
    n = len(views.tps)
    if not n:
        return "[]"
    got = shared.rows(views, canonical) if shared is not None else None
    if got is None:
        head = _tp_heads(views.tps, canonical)
        if head is None:
            return None
        body = _body(views)
        moved, moves = _moves(views)
    else:
        head, body, moved, moves = got
    pieces = [head, b",", _digits(views.leader), body]
    # the rows whose last three fields are not all at their defaults carry them:
    # `,[adding],[removing]` (a row's moves), then `,true` or `,false`
    new = views.is_new.astype(bool) if views.is_new is not None else None
    flagged = moved | new if new is not None else moved
    rows = np.flatnonzero(flagged)
    if len(rows):
        tail = moves[rows]
        if new is not None and not moved[rows].all():  # (a new replica of a partition not moving)
            tail = _pieces_matrix(len(rows), [tail, np.zeros((len(rows), 6), np.uint8)])
            tail[~moved[rows], :6] = np.frombuffer(b",[],[]", np.uint8)
        flags = _FLAGS[new[rows].astype(np.intp)] if new is not None else _FLAGS[np.zeros(len(rows), np.intp)]
        every = np.zeros((n, tail.shape[1] + flags.shape[1]), np.uint8)
        every[rows] = np.hstack([tail, flags])
        pieces.append(every)
    pieces.append(b"]")
    return _matrix_text(n, pieces)


_FLAGS = np.frombuffer(b",false,true\0", np.uint8).reshape(2, 6)
"""`,false` and `,true` (NUL after it), by the flag."""


def _moves(views: PartitionViews) -> tuple[np.ndarray, np.ndarray]:
    """Which rows move (a replica being added or removed) and, for those, `,[adding],[removing]`
    as a byte-matrix row (see `_matrix_text`); zeros elsewhere."""
    n = len(views.tps)
    if views.adding is None:
        return np.zeros(n, bool), np.zeros((n, 0), np.uint8)
    moved = views.adding.any(axis=1) | views.removing.any(axis=1)
    rows = np.flatnonzero(moved)
    if not len(rows):
        return moved, np.zeros((n, 0), np.uint8)
    texts = []
    for ids, adding, removing in zip(views.replicas[rows].tolist(), views.adding[rows].tolist(),
                                     views.removing[rows].tolist()):
        texts.append(f",{_ints_text([r for r, f in zip(ids, adding) if f])},"
                     f"{_ints_text([r for r, f in zip(ids, removing) if f])}".encode("ascii"))
    made = _texts_matrix(texts)
    out = np.zeros((n, made.shape[1]), np.uint8)
    out[rows] = made
    return moved, out


def _body(views: PartitionViews) -> np.ndarray:
    """`,leader_epoch,[isr],controller_epoch,zk_version,[replicas]` of each row, as one byte
    matrix (see `_matrix_text`): a view's fields after its leader."""
    return _pieces_matrix(len(views.tps), [*_after_leader_pieces(views), b",", _lists_matrix(views.replicas)])


class _DecisionTexts(dict):
    """The texts shared within one `digest` call: a broker request's text from its first tuple
    field on, by (plan, ids of those fields' values); and the release's rows (`_SharedRows`),
    made when a request first needs them."""

    __slots__ = ("commands", "_shared")

    def __init__(self, commands: tuple):
        super().__init__()
        self.commands = commands
        self._shared: _SharedRows | None = None

    def shared_rows(self) -> "_SharedRows":
        if self._shared is None:
            self._shared = _SharedRows(self.commands)
        return self._shared


class _SharedRows:
    """The rows' texts of one decision's requests gathered by the same `ImageRows` (one release):
    a partition's text up to its leader and after it is the same in every request that sends it
    (the same image row, the same columns), only its leader (-2 in UpdateMetadata for a topic
    being deleted) and its flags (`is_new` in LeaderAndIsr) differ. A whole-cluster release
    sends every partition in UpdateMetadata and each broker's share again in LeaderAndIsr, so
    the largest request of each release is written first and the others take their rows from it
    (a request holding a row it lacks is written on its own). Lives for one `digest` call."""

    __slots__ = ("largest", "made")

    def __init__(self, commands: tuple):
        self.largest: dict[int, PartitionViews] = {}  # id(Gathering) -> its largest request's partitions
        # id(Gathering) -> (position of each image row or -1, and the largest request's heads,
        # bodies, moved rows and moves)
        self.made: dict[int, tuple] = {}
        for c in commands:
            views = getattr(c, "partitions", None)
            if views.__class__ is PartitionViews and views.source is not None \
                    and len(views.tps) >= _VIEWS_FROM_COLUMNS:
                key = id(views.source[0])  # (the commands hold the Gathering alive for the call)
                top = self.largest.get(key)
                if top is None or len(views.tps) > len(top.tps):
                    self.largest[key] = views

    def rows(self, views: PartitionViews, canonical: Canonical) -> tuple | None:
        """`(heads, bodies, moved, moves)` of `views`' rows (`_tp_heads`, `_body`, `_moves`), or
        None: not gathered from columns another request shares, or a row the largest request
        does not hold."""
        source = views.source
        if source is None:
            return None
        key = id(source[0])
        top = self.largest.get(key)
        if top is None:
            return None
        made = self.made.get(key)
        if made is None:
            heads = _tp_heads(top.tps, canonical)
            if heads is None:
                return None
            at = np.full(source[0].size, -1, np.intp)
            at[top.source[1]] = np.arange(len(top.tps))
            made = self.made[key] = (at, heads, _body(top), *_moves(top))
        at, *texts = made
        if views is top:
            return tuple(texts)
        where = at[source[1]]
        if (where < 0).any():
            return None
        return tuple(t[where] for t in texts)


def _pieces_matrix(n: int, pieces: list) -> np.ndarray:
    """Pieces as `_matrix_text` lays them out (bytes the same in every row, or a byte matrix
    with a row per row), side by side in one matrix."""
    width = sum(len(p) if p.__class__ is bytes else p.shape[1] for p in pieces)
    out = np.empty((n, width), np.uint8)
    at = 0
    for p in pieces:
        if p.__class__ is bytes:
            out[:, at:at + len(p)] = np.frombuffer(p, np.uint8)
            at += len(p)
        else:
            out[:, at:at + p.shape[1]] = p
            at += p.shape[1]
    return out


def _writes_text(writes: PartitionWrites, canonical: Canonical) -> str | None:
    """The codec's canonical text of a `PartitionWrites` (a list of `PartitionWrite`s, each the
    positional list `[tp, [leader, leader_epoch, [isr], controller_epoch, zk_version],
    expected_version]`), written from the columns without making the writes. None as for
    `_views_text`."""
    n = len(writes.tps)
    if not n:
        return "[]"
    head = _tp_heads(writes.tps, canonical)
    if head is None:
        return None
    return _matrix_text(n, [head, b",[", *_leader_isr_pieces(writes), b"],", _digits(writes.expected), b"]"])


def _leader_isr_pieces(rows) -> list:
    """`leader,leader_epoch,[isr],controller_epoch,zk_version` of each row (see `_matrix_text`):
    the fields a `PartitionView` and a `LeaderIsr` write in the same order."""
    return [_digits(rows.leader), *_after_leader_pieces(rows)]


def _after_leader_pieces(rows) -> list:
    """`,leader_epoch,[isr],controller_epoch,zk_version` of each row: `_leader_isr_pieces`
    after the leader, which a release's requests share (`_SharedRows`)."""
    return [b",", _digits(rows.leader_epoch), b",", _lists_matrix(rows.isr), b",", _digits(rows.controller_epoch),
            b",", _digits(rows.zk_version)]


def _tp_heads(tps, canonical: Canonical) -> np.ndarray | None:
    """`[["topic",partition]` of each row, as byte-matrix rows (see `_matrix_text`); None if a
    partition number is not exactly an int."""
    topics, numbers = zip(*tps)
    if set(map(type, numbers)) != {int}:
        return None
    names = {t: k for k, t in enumerate(dict.fromkeys(topics))}
    heads = _texts_matrix([("[[" + canonical(t) + ",").encode("ascii") for t in names])
    return np.hstack([heads[np.fromiter(map(names.__getitem__, topics), np.intp, len(topics))],
                      _digits(np.array(numbers, np.int64)), np.full((len(topics), 1), ord("]"), np.uint8)])


def _matrix_text(n: int, pieces: list) -> str:
    """A JSON list of `n` rows from their pieces, each either bytes (the same in every row) or a
    byte matrix with a row per row. The text is laid out as one byte matrix, each field in its
    own columns and NUL where a field is shorter than its widest value (canonical JSON escapes
    NUL, so it never occurs in the text); dropping the NULs gives the text. Numbers become
    digits by a table or arithmetic over the whole column (`_digits`); topics, ISRs and replica
    lists are few distinct values, each written once in Python."""
    flat = _pieces_matrix(n, pieces + [b","]).ravel()
    return "[" + flat[flat != 0].tobytes()[:-1].decode("ascii") + "]"


_SMALL = np.frombuffer(b"".join(str(i).rjust(4, "\0").encode("ascii") for i in range(10_000)),
                       np.uint8).reshape(10_000, 4)
"""The digits of 0..9999, NUL before them: most numbers in a request (leaders, epochs, partition
numbers) are small, and a lookup is cheaper than the arithmetic."""


def _digits(column: np.ndarray) -> np.ndarray:
    """Each int as its decimal text, one row per value, NUL before the digits."""
    v = column.astype(np.int64)
    a = np.abs(v)
    top = int(a.max()) if len(a) else 0
    if top < len(_SMALL):
        digits = _SMALL[a]
        if top < 10:
            digits = digits[:, 3:]
        elif top < 100:
            digits = digits[:, 2:]
    else:
        pows = 10 ** np.arange(len(str(top)) - 1, -1, -1, dtype=np.int64)
        shown = a[:, None] >= pows
        shown[:, -1] = True  # (zero is "0")
        digits = np.where(shown, (a[:, None] // pows) % 10 + 48, 0).astype(np.uint8)
    negative = v < 0
    if not negative.any():
        return digits
    return np.hstack([np.where(negative, 45, 0).astype(np.uint8)[:, None], digits])  # "-"


def _lists_matrix(matrix: np.ndarray) -> np.ndarray:
    """Each row of a left-packed matrix (padded with -1) as the JSON list of its ids, the
    distinct rows written once."""
    n, width = matrix.shape
    if not width:
        return np.broadcast_to(np.frombuffer(b"[]", np.uint8), (n, 2))
    distinct, inverse = distinct_rows(matrix)
    return _texts_matrix([_ints_text(_cut(row)).encode("ascii") for row in distinct.tolist()])[inverse]


def _texts_matrix(texts: list[bytes]) -> np.ndarray:
    """Byte strings as the rows of a matrix, NUL after the shorter ones."""
    width = max(map(len, texts))
    return np.frombuffer(b"".join(t.ljust(width, b"\0") for t in texts), np.uint8).reshape(len(texts), width)


def _ints_text(ids) -> str:
    return "[" + ",".join(map(str, ids)) + "]"


def _views_agree(encoder: Callable, canonical: Canonical) -> bool:
    """Whether `_views_text` writes what the codec writes, on a probe holding every case (a
    non-ASCII topic, empty ISR, a reassignment, a new partition, negative ids)."""
    tps = (TopicPartition("t\u00e9\"", 0), TopicPartition("a", 7), TopicPartition("t\u00e9\"", 2))
    probe = PartitionViews(
        tps, np.array([1, -1, -2], np.int32), np.array([3, 0, 5], np.int32),
        np.array([[1, 2, -1], [-1, -1, -1], [2, -1, -1]], np.int32), np.array([4, 4, 1], np.int32),
        np.array([9, 0, 3], np.int32), np.array([[1, 2, 3], [3, -1, -1], [2, 1, 4]], np.int32),
        adding=np.array([[False] * 3, [False] * 3, [False, False, True]]),
        removing=np.array([[False] * 3, [False] * 3, [True, False, False]]),
        is_new=np.array([False, True, False]))
    try:
        return _views_text(probe, canonical) == canonical(encoder(probe))
    except Exception:  # (a codec that changed beyond recognition: the codec's own path)
        return False


class Digester:
    """`digest(commands)` equal to `codec.reference_digest(commands)`, with its own caches.

    - `encode(command, memo)`: the codec's encoding of one command, sharing the encoded list of a
      tuple met again through `memo` (as `codec.encode_commands` does for a batch);
    - `canonical`: the JSON writer (the codec's `canonical_json`, or one writing the same text
      faster, as the replay's orjson writer);
    - `field_encoder(cls, name)` (optional): the codec's encoding of one field of a command
      class, as its command encoding writes that field: a broker request's partitions are then
      encoded without the rest of the command (an ISR change's digest spent a tenth of its time
      building the dict of a command it only took two fields from).
    """

    def __init__(self, encode: Callable[[Any, dict | None], dict], canonical: Canonical,
                 field_encoder: Callable[[type, str], Callable] | None = None):
        self.encode = encode
        self.canonical = canonical
        self.requests = {cls: plan for cls, plan in (
            (C.SendUpdateMetadata, _Request.plan(C.SendUpdateMetadata, "live_brokers", field_encoder)),
            (C.SendLeaderAndIsr, _Request.plan(C.SendLeaderAndIsr, "live_leaders", field_encoder)))
            if plan is not None}
        self._key_texts: dict[str, str] = {}
        self._orders: dict[tuple, list[str]] = {}
        # a release's partitions held as columns are written from them (_views_text) if that
        # gives the codec's text on a probe; otherwise they are encoded as the codec does
        encoder = field_encoder(C.SendUpdateMetadata, "partitions") if field_encoder is not None else None
        self.views_from_columns = encoder is not None and _views_agree(encoder, canonical)
        self.writes_from_columns = self._writes_agree()

    def digest(self, commands: Iterable[Any]) -> str:
        if not commands:
            return _EMPTY
        commands = tuple(commands)  # keeps every value alive, so ids stay unique during the call
        requests = self.requests
        for c in commands:
            if c.__class__ not in requests:
                return self._generic(commands)
        return self._requests(commands)

    __call__ = digest

    # -- broker requests only -------------------------------------------------------------------

    def _requests(self, commands: tuple) -> str:
        rests = _DecisionTexts(commands)  # (plan, ids of the tuple fields' values) -> their text
        pieces = [b"["]
        append = pieces.append
        parts_of = self._request_parts
        for c in commands:
            parts = parts_of(c, rests)
            if parts is None:
                return self._generic(commands)  # not exactly ints (a bool): as the codec writes it
            append(parts[0])
            append(parts[1])
            append(b",")
        pieces[-1] = b"]"
        if all(len(text) < _JOINED for text in rests.values()):  # (an ISR change: small texts)
            return hashlib.blake2b(b"".join(pieces), digest_size=16).hexdigest()
        h = hashlib.blake2b(digest_size=16)  # a big text shared by several requests: not copied per request
        for piece in pieces:
            h.update(piece)
        return h.hexdigest()

    def _request_parts(self, c, rests: "_DecisionTexts") -> tuple[bytes, bytes] | None:
        """A broker request's text in two pieces, its int fields' and the rest, the rest shared
        through `rests` within a decision (a release's UpdateMetadata of 10,000 partitions is the
        same 430 kB in every broker's request: encoded once, hashed from the same bytes); None
        if one of its int fields is not exactly an int (the codec's path)."""
        plan = self.requests[c.__class__]
        ints = plan.ints(c)
        a, b, e = ints  # (the three of _INTS)
        if a.__class__ is not int or b.__class__ is not int or e.__class__ is not int:
            return None
        values = plan.rest(c)
        key = (plan, *map(id, values))
        text = rests.get(key)
        if text is None:
            text = rests[key] = self._rest_text(plan, c, values, rests).encode("ascii")
        heads = plan.heads
        head = heads.get(ints)  # (the same few brokers and epochs in decision after decision)
        if head is None:
            if len(heads) >= _HEADS_CAP:
                heads.clear()
            head = heads[ints] = (plan.head % ints).encode("ascii")
        return head, text

    def _rest_text(self, plan: _Request, c, values: tuple, rests: "_DecisionTexts") -> str:
        """A broker request's text from its first tuple field on (`"live_brokers":...`)."""
        fields = plan.fields
        if fields is not None:
            try:
                return self._fields_text(plan, c, values, fields, rests)
            except (AttributeError, TypeError):
                pass  # a value the codec cannot encode: its own encoding says so (CodecError)
        parts = []
        encoded = None
        for (name, key, is_brokers), value in zip(plan.rest_steps, values):
            if is_brokers:
                text = self._brokers_text(plan, value, c)
            else:
                if encoded is None:
                    brokers = getattr(c, plan.brokers_field)
                    # the codec reuses its memo entry for a tuple it meets again: give it the
                    # broker tuple as already encoded, since its text comes from the cache
                    # (unless `partitions`, the other memoised field, is that very tuple)
                    memo = {id(brokers): _SKIPPED} if brokers and brokers is not c.partitions else None
                    encoded = self.encode(c, memo)
                v = encoded[name]
                text = "[]" if v.__class__ is list and not v else self.canonical(v)
            parts.append(key + text)
        parts.append(plan.tail)
        return "".join(parts)

    def _fields_text(self, plan: _Request, c, values: tuple, fields: dict, rests: "_DecisionTexts") -> str:
        """`_rest_text` with each field encoded on its own (the same encoding: the codec's)."""
        parts = []
        canonical = self.canonical
        for (name, key, is_brokers), value in zip(plan.rest_steps, values):
            if is_brokers:
                text = self._brokers_text(plan, value, c)
            elif value.__class__ is PartitionViews and len(value.tps) >= _VIEWS_FROM_COLUMNS \
                    and self.views_from_columns \
                    and (text := _views_text(value, canonical, rests.shared_rows())) is not None:
                pass  # written from the columns (see _views_text)
            else:
                v = fields[name](value)
                text = "[]" if v.__class__ is list and not v else canonical(v)
            parts.append(key + text)
        parts.append(plan.tail)
        return "".join(parts)

    def _brokers_text(self, plan: _Request, value: tuple, command) -> str:
        cache = plan.brokers
        key = tuple(map(id, value))
        hit = cache.get(key)
        if hit is not None:
            return hit[1]
        text = None
        if plan.fields is not None:  # the field alone (a miss encoding the whole command made its views)
            try:
                text = self.canonical(plan.fields[plan.brokers_field](value))
            except (AttributeError, TypeError):
                pass  # a value the codec cannot encode: its own encoding says so (CodecError)
        if text is None:
            text = self.canonical(self.encode(command, None)[plan.brokers_field])
        if len(cache) >= _BROKERS_CAP:
            cache.clear()
        cache[key] = (value, text)
        return text

    # -- a whole-cluster decision's writes ---------------------------------------------------------

    def _write_states_text(self, c) -> str | None:
        """A `WritePartitionStates` holding columns (`PartitionWrites`): the codec's text of the
        command without its writes (`"writes"` sorts last), the writes written from the columns."""
        body = _writes_text(c.writes, self.canonical)
        if body is None:
            return None
        head = self.canonical(self.encode(C.WritePartitionStates(write_id=c.write_id, writes=()), None))
        if not head.endswith(_NO_WRITES):
            return None
        return head[:-len(_NO_WRITES)] + '"writes":' + body + "}"

    def _writes_agree(self) -> bool:
        """Whether `_write_states_text` writes what the codec writes, on a probe (a non-ASCII
        topic, an empty ISR, a create, leader -1)."""
        probe = C.WritePartitionStates(write_id=7, writes=PartitionWrites(
            [TopicPartition("t\u00e9\"", 0), TopicPartition("a", 7), TopicPartition("t\u00e9\"", 12_345)],
            np.array([1, -1, 3], np.int32), np.array([3, 0, 12_000], np.int32),
            np.array([[1, 2, -1], [-1, -1, -1], [3, -1, -1]], np.int32), np.array([4, 4, 4], np.int32),
            np.array([9, 0, 70_000], np.int32), np.array([8, -1, 69_999], np.int32)))
        try:
            return self._write_states_text(probe) == self.canonical(self.encode(probe, None))
        except Exception:  # (a codec that changed beyond recognition: the codec's own path)
            return False

    # -- any decision -----------------------------------------------------------------------------

    def _generic(self, commands: tuple) -> str:
        memo: dict = {}
        rests = _DecisionTexts(commands)
        requests = self.requests
        encoded: list = []  # per command: its text (a broker request: two pieces), or its encoding
        for c in commands:
            text = None
            if c.__class__ in requests:
                text = self._request_parts(c, rests)
            elif c.__class__ is C.WritePartitionStates and c.writes.__class__ is PartitionWrites \
                    and len(c.writes) >= _VIEWS_FROM_COLUMNS and self.writes_from_columns:
                text = self._write_states_text(c)
            encoded.append(text if text is not None else self.encode(c, memo))  # as codec.encode_commands
        seen: dict[int, int] = {}
        for d in encoded:
            if d.__class__ is not dict:
                continue
            for v in d.values():
                if v.__class__ is list:
                    seen[id(v)] = seen.get(id(v), 0) + 1
        canonical = self.canonical
        key_texts = self._key_texts
        texts: dict[int, str] = {}
        h = hashlib.blake2b(digest_size=16)
        h.update(b"[")
        for n, d in enumerate(encoded):
            if n:
                h.update(b",")
            if d.__class__ is tuple:  # a broker request's two pieces
                h.update(d[0])
                h.update(d[1])
                continue
            if d.__class__ is str:
                h.update(d.encode("ascii"))
                continue
            sig = tuple(d)
            order = self._orders.get(sig)
            if order is None:
                order = self._orders[sig] = sorted(sig)
            parts = []
            for k in order:
                v = d[k]
                cls = v.__class__
                if cls is int:
                    text = str(v)
                elif cls is list:
                    vid = id(v)
                    text = texts.get(vid)
                    if text is None:
                        text = canonical(v)
                        if seen[vid] > 1:
                            texts[vid] = text
                else:
                    text = canonical(v)
                kt = key_texts.get(k)
                if kt is None:
                    kt = key_texts[k] = canonical(k) + ":"
                parts.append(kt + text)
            h.update(("{" + ",".join(parts) + "}").encode("ascii"))
        h.update(b"]")
        return h.hexdigest()
