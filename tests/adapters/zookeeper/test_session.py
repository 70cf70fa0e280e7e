"""adapters/zookeeper/session.py against a real ZooKeeper: first aiozk 0.32.0's own behaviour (what the adapter
is built around), then ZkSession's semantics."""
from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import re
import struct
import time

import aiozk
import pytest

from adapters.zookeeper import session as Z
from adapters.zookeeper.session import (
    BadVersion,
    Check,
    ConnectionLost,
    Create,
    Delete,
    Fenced,
    NoAuth,
    NodeExists,
    NoNode,
    NotEmpty,
    SessionClosed,
    SessionEvent,
    SessionExpired,
    SetData,
    TransactionFailed,
    ZkSession,
    force_expire,
    parse_connect_string,
)
from adapters.zookeeper.server import EmbeddedZooKeeper


@pytest.fixture
async def zk(zk_connect):
    session = await ZkSession.connect(zk_connect, session_timeout_ms=6000)
    yield session
    await session.close()


@pytest.fixture
async def other(zk_connect):
    """A second, independent session on the same chroot."""
    session = await ZkSession.connect(zk_connect, session_timeout_ms=6000)
    yield session
    await session.close()


async def next_matching(queue: asyncio.Queue, predicate, timeout: float = 5.0):
    async with asyncio.timeout(timeout):
        while True:
            value = await queue.get()
            if predicate(value):
                return value


async def raw_client(connect_string: str, timeout_s: float) -> aiozk.ZKClient:
    hosts, chroot = parse_connect_string(connect_string)
    client = aiozk.ZKClient(hosts, chroot=chroot, session_timeout=timeout_s)
    await client.start()
    return client


async def close_raw(client: aiozk.ZKClient) -> None:
    with contextlib.suppress(Exception):  # aiozk's close() itself raises when the server went away
        await asyncio.wait_for(client.close(), 5)


# -- connect strings --------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1:2181", ("127.0.0.1:2181", None)),
    ("a:1,b:2/kafka", ("a:1,b:2", "/kafka")),
    ("a:1/kafka/prod/", ("a:1", "/kafka/prod")),
    ("a:1/", ("a:1", None)),
    ("zk1, zk2:2182/c", ("zk1,zk2:2182", "/c")),
    ("[::1]:2181/c", ("[::1]:2181", "/c")),
])
def test_parse_connect_string(text, expected):
    assert parse_connect_string(text) == expected


@pytest.mark.parametrize("text", ["", "/chroot", "a:99999", "a:1,,b:2", "a:1//x", "a:x", "a:1/b/../c"])
def test_parse_connect_string_rejects(text):
    with pytest.raises(ValueError):
        parse_connect_string(text)


# -- aiozk 0.32.0 as it is ------------------------------------------------------------------------


async def test_aiozk_does_not_parse_a_chroot_in_the_connect_string(zk_connect, zk):
    client = aiozk.ZKClient(zk_connect, session_timeout=2)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(client.start(), 2)  # the "port" is "P/chroot": never connects
    assert isinstance(client.session.repair_loop_task.exception(), ValueError)
    hosts, chroot = parse_connect_string(zk_connect)
    client = aiozk.ZKClient(hosts, chroot=chroot, session_timeout=2)  # chroot= works
    await client.start()
    await client.create("/made-by-aiozk", b"1")
    await close_raw(client)
    assert (await zk.get("/made-by-aiozk"))[0] == b"1"


async def test_aiozk_failed_transaction_is_just_falsy(zk_connect, zk):
    client = await raw_client(zk_connect, 5)
    try:
        await client.create("/a", b"before")
        txn = client.begin_transaction()
        txn.set_data("/a", b"after")
        txn.check_version("/a", 7)
        result = await txn.commit()
        assert not result  # no exception, no hint which operation failed
        assert result.updated == set() and result.checked == set()
        assert await client.get_data("/a") == b"before"
    finally:
        await close_raw(client)
    # the same through ZkSession names the operation and the reason
    with pytest.raises(TransactionFailed) as failed:
        await zk.multi([SetData("/a", b"after"), Check("/a", 7)])
    index, error = failed.value.first_failure
    assert index == 1 and isinstance(error, BadVersion)
    assert failed.value.problems == {1: Z.Problem("version is 1, expected 7", (await zk.exists("/a")))}


async def test_aiozk_expiry_is_silent_and_ephemerals_are_not_recreated(zk_connect, other):
    client = await raw_client(zk_connect, 2)
    try:
        await client.create("/eph", b"", ephemeral=True)
        old = client.session.session_id
        start = time.monotonic()
        await force_expire(zk_connect, old, client.session.password)
        assert await other.exists("/eph") is None
        while client.session.session_id in (old, None):  # no listener to ask: poll
            await asyncio.sleep(0.05)
            assert time.monotonic() - start < 10
        noticed = time.monotonic() - start
        assert noticed > 1.0  # only when its heartbeat timed out (2/3 of the 2 s timeout or more)
        assert not await client.exists("/eph")  # a new session, quietly, without the ephemeral
        assert not any(hasattr(obj, name) for obj in (client, client.session)
                       for name in ("add_listener", "add_state_listener", "on_session_change"))
    finally:
        await close_raw(client)


async def test_clean_shutdown_aiozk_waits_for_the_heartbeat_we_do_not(tmp_path):
    with EmbeddedZooKeeper(tmp_path / "zk") as server:
        raw = await raw_client(server.connect_string, 3)
        ours = await ZkSession.connect(server.connect_string, session_timeout_ms=3000)
        await ours.create("/x", b"1")
        session = ours.session_id
        await asyncio.to_thread(server.stop)
        stopped = time.monotonic()
        outcome = {}

        async def timed(name, coro):
            try:
                await coro
                outcome[name] = ("ok", time.monotonic() - stopped)
            except Exception as error:
                outcome[name] = (type(error).__name__, time.monotonic() - stopped)

        tasks = [asyncio.create_task(timed("raw", raw.get("/x"))),
                 asyncio.create_task(timed("ours", ours.get("/x")))]
        await asyncio.wait_for(_until(lambda: not ours.connected), 1.0)  # EOF noticed at once
        assert raw.session.state == "connected"  # aiozk has not noticed anything
        await asyncio.to_thread(server.start)
        restarted = time.monotonic() - stopped
        await asyncio.gather(*tasks)
        # ours: the read waited for the reconnect and went through in the same session
        assert outcome["ours"][0] == "ok" and outcome["ours"][1] < restarted + 3.0
        assert ours.session_id == session
        # raw: the request sat on the dead socket until the heartbeat gave up (~the timeout)
        assert outcome["raw"][1] > 1.9
        assert outcome["raw"][0] in ("TimeoutError", "ok")
        await ours.close()
        await close_raw(raw)


# -- ZkSession: connecting and single operations ----------------------------------------------


async def test_connect_creates_a_nested_chroot(zk_server, zk_connect):
    zk = await ZkSession.connect(zk_connect + "/deep/er")
    root = await ZkSession.connect(zk_server.connect_string)
    try:
        assert zk.chroot == parse_connect_string(zk_connect)[1] + "/deep/er"
        await zk.create("/n", b"1")
        assert (await root.get(zk.chroot + "/n"))[0] == b"1"
        assert await zk.get_children("/") == ["n"]
        created = await zk.create("/seq-", b"", sequential=True)
        assert re.fullmatch(r"/seq-\d{10}", created)
    finally:
        await zk.close()
        await root.close()


async def test_single_operations_and_errors(zk):
    assert await zk.create("/a", b"1") == "/a"
    data, stat = await zk.get("/a")
    assert data == b"1" and stat.version == 0 and stat.ephemeral_owner == 0 and stat.czxid > 0
    with pytest.raises(NodeExists):
        await zk.create("/a", b"")
    with pytest.raises(NoNode):
        await zk.get("/missing")
    with pytest.raises(NoNode):
        await zk.create("/x/y", b"")
    assert await zk.exists("/missing") is None
    assert (await zk.exists("/a")).version == 0
    assert (await zk.set("/a", b"2", version=0)).version == 1
    with pytest.raises(BadVersion):
        await zk.set("/a", b"3", version=0)
    await zk.create("/a/b/c", None, make_parents=True)
    assert await zk.get("/a/b/c") == (b"", (await zk.exists("/a/b/c")))
    with pytest.raises(NotEmpty):
        await zk.delete("/a")
    with pytest.raises(BadVersion):
        await zk.delete("/a/b/c", version=3)
    await zk.create("/eph", b"", ephemeral=True)
    assert (await zk.exists("/eph")).ephemeral_owner == zk.session_id
    assert sorted(await zk.get_children("/")) == ["a", "eph"]
    await zk.delete_recursive("/a")
    await zk.delete_recursive("/missing")
    assert await zk.exists("/a") is None
    await zk.delete("/eph", version=0)
    assert await zk.get_children("/") == []


async def test_ensure_path_looks_an_existing_path_up_once_and_creates_what_is_missing(zk, monkeypatch):
    looked_up = []
    real = zk.exists

    async def exists(path, watch=False):
        looked_up.append(path)
        return await real(path, watch)

    monkeypatch.setattr(zk, "exists", exists)
    await zk.ensure_path("/p/q/r")
    assert await real("/p/q/r") is not None
    assert looked_up == ["/p/q/r", "/p", "/p/q", "/p/q/r"]
    looked_up.clear()
    await zk.ensure_path("/p/q/r")
    assert looked_up == ["/p/q/r"]  # one round trip, not one per level
    looked_up.clear()
    await zk.ensure_path("/p/q/s/t")
    assert looked_up[0] == "/p/q/s/t" and await real("/p/q/s/t") is not None
    await zk.delete_recursive("/p")


async def test_get_many_pipelines_reads(zk):
    paths = [f"/p/{i}" for i in range(3000)]
    versions, conflicts = await zk.write_partition_states(None, [(p, b"v%d" % i, -1) for i, p in enumerate(paths)])
    assert not conflicts
    got = await zk.get_many(paths + ["/missing", "/p/nope"])
    assert got["/missing"] is None and got["/p/nope"] is None
    assert all(got[p][0] == b"v%d" % i and got[p][1].version == 0 for i, p in enumerate(paths))
    # one read per request (servers before 3.6 have no multiRead) gives the same answer
    assert await zk._read_many(Z._GET_DATA, paths[:500], 64, batch=1) == {p: got[p] for p in paths[:500]}
    stats = await zk.exists_many(["/p/7", "/missing"])
    assert stats == {"/p/7": got["/p/7"][1], "/missing": None}


def drop_next_answer(monkeypatch, opcode: int) -> list:
    """Make the next answer to a request with `opcode` vanish with its connection, after the
    server has applied the request: the in-flight case where the outcome is unknown."""
    original = Z._Connection._dispatch
    dropped = []

    def dispatch(self, buf, start, end):
        (xid,) = struct.unpack_from("!i", buf, start)
        if not dropped and self.opcode_xref.get(xid) == opcode:
            dropped.append(xid)
            self._on_lost(self)
            return
        original(self, buf, start, end)

    monkeypatch.setattr(Z._Connection, "_dispatch", dispatch)
    return dropped


async def test_a_write_whose_answer_is_lost_is_read_back(zk, monkeypatch):
    await zk.create("/a", b"1")
    write = asyncio.ensure_future(zk.set("/a", b"2", 0))
    read = asyncio.ensure_future(zk.get("/a"))
    await asyncio.sleep(0)  # both queued on the connection...
    zk._session._lose(zk._session.conn)  # ...which dies before they leave: both are sent again
    assert (await write).version == 1
    assert (await read)[0] in (b"1", b"2")

    dropped = drop_next_answer(monkeypatch, Z._SET_DATA)
    assert (await zk.set("/a", b"3", 1)).version == 2  # applied, answer lost: read back as done
    assert dropped
    with pytest.raises(BadVersion):
        await zk.set("/a", b"4", 1)
    drop_next_answer(monkeypatch, Z._CREATE2)
    assert await zk.create("/e", b"x", ephemeral=True) == "/e"
    drop_next_answer(monkeypatch, Z._DELETE)
    await zk.delete("/e", 0)
    assert await zk.exists("/e") is None
    drop_next_answer(monkeypatch, Z._CREATE2)
    with pytest.raises(ConnectionLost):  # which sequence number did we get? nobody can tell
        await zk.create("/seq-", b"", sequential=True)


async def test_close_fails_waiting_calls(zk_connect):
    zk = await ZkSession.connect(zk_connect)
    await zk.close()
    with pytest.raises(SessionClosed):
        await zk.get("/")


# -- multi-ops and fencing ------------------------------------------------------------------------


async def test_multi_success_failure_and_fencing(zk, other):
    await zk.create("/controller_epoch", b"1")
    results = await zk.multi([Create("/m", b"x"), SetData("/m", b"y", 0), Check("/m", 1), Create("/d", b""),
                              Delete("/d", 0)], epoch_zk_version=0)
    assert results[0] == "/m" and results[1].version == 1 and results[2:] == [None, "/d", None]

    with pytest.raises(TransactionFailed) as failed:
        await zk.multi([Create("/n1", b""), SetData("/m", b"z", 0), Delete("/missing"), Create("/m", b""),
                        Create("/no/parent", b"")], epoch_zk_version=0)
    index, error = failed.value.first_failure
    assert index == 1 and isinstance(error, BadVersion)
    problems = failed.value.problems
    assert sorted(problems) == [1, 2, 3, 4]
    assert problems[1] == Z.Problem("version is 1, expected 0", await zk.exists("/m"))
    assert [problems[i].reason for i in (2, 3, 4)] == ["missing", "exists", "parent missing"]
    assert await zk.exists("/n1") is None and (await zk.get("/m"))[0] == b"y"  # nothing applied

    await other.set("/controller_epoch", b"2")  # another controller took over
    with pytest.raises(Fenced) as fenced:
        await zk.multi([Create("/n2", b"")], epoch_zk_version=0)
    assert (fenced.value.expected_version, fenced.value.current_version) == (0, 1)
    assert await zk.exists("/n2") is None
    assert await zk.multi([Create("/n2", b"")], epoch_zk_version=1) == ["/n2"]


STATE = "/brokers/topics/t{:03d}/partitions/{}/state"


async def test_write_partition_states_conflict_in_the_middle_of_10000(zk, other):
    await zk.create("/controller_epoch", b"5")
    paths = [STATE.format(i // 100, i % 100) for i in range(10_000)]
    versions, conflicts = await zk.write_partition_states(0, [(p, b'{"leader":1}', -1) for p in paths])
    assert conflicts == {} and len(versions) == 10_000 and set(versions.values()) == {0}
    assert await zk.get("/brokers/topics/t000/partitions/0") == (b"", (await zk.exists("/brokers/topics/t000/partitions/0")))

    planted = paths[5_000]
    await other.set(planted, b'{"leader":2,"isr":[2]}', 0)  # a partition leader shrank the ISR meanwhile
    versions, conflicts = await zk.write_partition_states(0, [(p, b'{"leader":3}', 0) for p in paths])
    assert conflicts == {planted: (b'{"leader":2,"isr":[2]}', 1)}
    assert len(versions) == 9_999 and planted not in versions and set(versions.values()) == {1}
    now = await other.get_many(paths)
    assert all(now[p][0] == b'{"leader":3}' for p in paths if p != planted)
    assert now[planted][0] == b'{"leader":2,"isr":[2]}'

    new = "/brokers/topics/new/partitions/0/state"
    versions, conflicts = await zk.write_partition_states(
        0, [(new, b"n", -1), (paths[0], b"x", -1), ("/gone/state", b"x", 4), (paths[1], b"y", 1)])
    assert versions == {new: 0, paths[1]: 2}
    assert conflicts == {paths[0]: (b'{"leader":3}', 1), "/gone/state": None}


async def test_write_partition_states_is_fenced_and_applies_nothing(zk, other):
    await zk.create("/controller_epoch", b"1")
    paths = [STATE.format(i // 100, i % 100) for i in range(1_000)]
    await zk.write_partition_states(0, [(p, b"old", -1) for p in paths])
    await other.set("/controller_epoch", b"2")
    with pytest.raises(Fenced) as fenced:
        await zk.write_partition_states(0, [(p, b"new", 0) for p in paths])
    assert fenced.value.current_version == 1 and fenced.value.applied == {}
    assert {v[0] for v in (await other.get_many(paths)).values()} == {b"old"}
    with pytest.raises(Fenced):  # creating parents is fenced too
        await zk.write_partition_states(0, [("/brokers/topics/x/partitions/0/state", b"", -1)])
    assert await zk.exists("/brokers/topics/x") is None


async def test_write_partition_states_sends_each_chunk_before_encoding_the_next(zk):
    """With `encode`, ZooKeeper commits the first chunks while later values are still being
    encoded: a failover's first new leaders land sooner (before, all 10,000 states were encoded
    before the first byte went out)."""
    paths = [f"/stream/{i}" for i in range(200)]
    await zk.write_partition_states(None, [(p, b"0", -1) for p in paths])
    order = []

    def encode(value: int) -> bytes:
        time.sleep(0.001)  # 10 ms a chunk: ample time for an earlier chunk's answer to arrive
        order.append(("encoded", value))
        return b"%d" % value

    versions, conflicts = await zk.write_partition_states(
        None, [(p, i, 0) for i, p in enumerate(paths)], chunk_ops=10, encode=encode,
        on_landed=lambda landed: order.append(("landed", len(landed))))
    assert not conflicts and sorted(versions) == sorted(paths) and set(versions.values()) == {1}
    assert [v for kind, v in order if kind == "encoded"] == list(range(200))  # each value once
    first_landed = next(i for i, (kind, _) in enumerate(order) if kind == "landed")
    last_encoded = max(i for i, (kind, _) in enumerate(order) if kind == "encoded")
    assert first_landed < last_encoded, "no chunk committed before every value was encoded"
    assert (await zk.get(paths[-1]))[0] == b"199"


async def test_write_partition_states_chunks_by_size(zk):
    big = b"x" * 200_000  # 20 of these are 4 MB: one multi-op would break the 1 MB request limit
    writes = [(f"/big/{i}", big, -1) for i in range(20)]
    versions, conflicts = await zk.write_partition_states(None, writes)
    assert not conflicts and len(versions) == 20


async def test_write_partition_states_after_a_lost_answer_reads_back_what_landed(zk, monkeypatch):
    await zk.create("/controller_epoch", b"1")
    paths = [f"/s/{i}" for i in range(300)]
    await zk.write_partition_states(0, [(p, b"a", -1) for p in paths])
    dropped = drop_next_answer(monkeypatch, Z._MULTI)  # the server applied a chunk; we never hear
    versions, conflicts = await zk.write_partition_states(0, [(p, b"b", 0) for p in paths], chunk_ops=100)
    assert dropped and conflicts == {} and versions == {p: 1 for p in paths}


# -- watches -----------------------------------------------------------------------------------------


async def test_children_watch_is_level_triggered(zk, other):
    seen = asyncio.Queue()
    watch = await zk.watch_children("/brokers/ids", seen.put_nowait)
    assert seen.get_nowait() is None  # not there yet: reported, and watched for creation
    await other.create("/brokers/ids/1", b"", make_parents=True)
    await next_matching(seen, lambda v: v == ["1"])
    await other.create("/brokers/ids/2", b"", ephemeral=True)
    await next_matching(seen, lambda v: v == ["1", "2"])
    await other.delete("/brokers/ids/1")
    await next_matching(seen, lambda v: v == ["2"])
    await other.delete_recursive("/brokers")
    await next_matching(seen, lambda v: v is None)
    watch.cancel()
    await other.create("/brokers/ids/3", b"", make_parents=True)
    await asyncio.sleep(0.2)
    assert seen.empty()


async def test_data_watch_reports_changes_deletion_and_recreation(zk, other):
    seen = asyncio.Queue()
    await zk.watch_data("/controller", seen.put_nowait)
    assert seen.get_nowait() is None
    await other.create("/controller", b"1", ephemeral=True)
    assert (await next_matching(seen, lambda v: v is not None))[0] == b"1"
    await other.set("/controller", b"2")
    assert (await next_matching(seen, lambda v: v is not None and v[1].version == 1))[0] == b"2"
    await other.delete("/controller")
    await next_matching(seen, lambda v: v is None)
    await other.create("/controller", b"3")
    value = await next_matching(seen, lambda v: v is not None)
    assert value[0] == b"3" and value[1].version == 0


async def test_a_change_during_a_read_is_not_lost(zk, other, monkeypatch):
    await other.create("/n", b"0")
    seen = asyncio.Queue()
    await zk.watch_data("/n", seen.put_nowait)
    assert seen.get_nowait()[0] == b"0"
    original = zk._read
    raced = []

    async def read_racing_a_write(opcode, path, watch=False, bound=False):
        read = asyncio.ensure_future(original(opcode, path, watch, bound))
        if watch and not raced:  # the re-read after the first change: change it again meanwhile
            raced.append(await other.set("/n", b"during-read"))
        return await read

    monkeypatch.setattr(zk, "_read", read_racing_a_write)
    await other.set("/n", b"1")
    await next_matching(seen, lambda v: v[0] == b"during-read")
    assert raced
    # and under a burst of writes, the last value delivered is the last value written
    await asyncio.gather(*(other.set("/n", b"burst-%d" % i) for i in range(200)))
    await next_matching(seen, lambda v: v[0] == b"burst-199")


# -- sessions ---------------------------------------------------------------------------------------


async def test_session_change_is_reported_after_force_expire(zk_connect, other):
    zk = await ZkSession.connect(zk_connect, session_timeout_ms=6000)
    try:
        events, late = [], []
        zk.on_session_change(events.append)

        def start_a_call_in_the_dying_session(event):
            if event.kind == "expired":
                late.append(asyncio.ensure_future(zk.get("/w")))

        zk.on_session_change(start_a_call_in_the_dying_session)
        await zk.create("/eph", b"", ephemeral=True)
        seen = asyncio.Queue()
        await zk.watch_data("/w", seen.put_nowait)
        assert seen.get_nowait() is None
        old = zk.session_id
        start = time.monotonic()
        await force_expire(zk_connect, old, zk.password)
        assert await other.exists("/eph") is None  # dead on the server when force_expire returns
        event = await asyncio.wait_for(zk.wait_session_change(old), 5)
        assert event == SessionEvent("expired", old, None)
        assert time.monotonic() - start < 2.0  # not a heartbeat timeout away (6 s here)
        await asyncio.wait_for(_until(lambda: len(events) == 2), 5)
        assert [e.kind for e in events] == ["expired", "established"]
        assert events[1].old_session_id == old and events[1].new_session_id == zk.session_id != old
        assert zk.generation == 2
        with pytest.raises(SessionExpired):
            await late[0]  # started in the old session: not silently run in the new one
        assert await zk.exists("/eph") is None  # recreating ephemerals is the caller's business
        await other.create("/w", b"after")  # the watch was re-armed in the new session
        assert (await next_matching(seen, lambda v: v is not None))[0] == b"after"
    finally:
        await zk.close()


async def _until(predicate, step: float = 0.01):
    while not predicate():
        await asyncio.sleep(step)


# -- ACLs --------------------------------------------------------------------------------------------


async def test_acl_mode_gives_creator_all_and_world_read(zk_connect):
    with pytest.raises(ValueError):
        await ZkSession.connect(zk_connect, acl_mode=True)
    owner = await ZkSession.connect(zk_connect, auth=("digest", "kafka:secret"), acl_mode=True)
    foreign = await ZkSession.connect(zk_connect)
    intruder = await ZkSession.connect(zk_connect, auth=("digest", "mallory:guess"))
    try:
        await owner.create("/brokers/ids/1", b"x", make_parents=True)
        digest = base64.b64encode(hashlib.sha1(b"kafka:secret").digest()).decode()
        assert sorted(await owner.get_acl("/brokers/ids/1")) == [(1, "world", "anyone"),
                                                                 (31, "digest", f"kafka:{digest}")]
        assert (await foreign.get("/brokers/ids/1"))[0] == b"x"
        for stranger in (foreign, intruder):
            with pytest.raises(NoAuth):
                await stranger.set("/brokers/ids/1", b"y")
            with pytest.raises(NoAuth):
                await stranger.create("/brokers/ids/2", b"")
        # ZooKeeper keeps auth per connection: it is sent again after a reconnect
        owner._session._lose(owner._session.conn)
        assert (await owner.set("/brokers/ids/1", b"z")).version == 1
    finally:
        for session in (owner, foreign, intruder):
            await session.close()


async def test_a_consumed_notification_is_deleted_only_by_the_current_controller(zk):
    """Kafka deletes the ISR-change and log-dir notifications it read in an epoch-checked
    multi-op: a controller whose epoch moved deletes nothing."""
    await zk.create(Z.CONTROLLER_EPOCH_PATH, b"1")
    await zk.set(Z.CONTROLLER_EPOCH_PATH, b"2")  # version 1: the current controller's token
    await zk.create("/isr_change_notification/isr_change_0000000000", b"{}", make_parents=True)
    path = "/isr_change_notification/isr_change_0000000000"
    with pytest.raises(Fenced):
        await zk.delete_as_controller(path, epoch_zk_version=0)  # a replaced controller
    assert await zk.exists(path) is not None
    assert await zk.delete_as_controller(path, epoch_zk_version=1) is True
    assert await zk.exists(path) is None
    assert await zk.delete_as_controller(path, epoch_zk_version=1) is False  # already gone


async def test_pings_in_flight_together_all_read_as_pings(zk, caplog):
    """Pings share one xid: with several in flight (a loop that stalled past a heartbeat sends
    another before the first is answered), every reply must read as a ping's, not only the
    first (the others used to log 'unreadable ZooKeeper reply to opcode None')."""
    conn = zk._session.conn
    replies = await asyncio.wait_for(asyncio.gather(*(conn.send(aiozk.protocol.PingRequest()) for _ in range(3))), 10)
    assert len(replies) == 3
    assert "unreadable ZooKeeper reply" not in caplog.text


@pytest.mark.parametrize("silent", ["probe", "handshake"])
async def test_a_silent_server_is_given_up_in_time_to_save_the_session(zk_server, silent):
    """A server that takes the connection and never answers (a JVM starting or stopping on a
    loaded machine holds it in its accept backlog) must not hold the client for the whole
    session timeout, whether it is silent to aiozk's `srvr` probe or to the ConnectRequest:
    the client gives up in time (half the connect share; 2/3 of the timeout for the handshake,
    Java's read timeout) and its next try saves the session. Before, each waited the whole
    timeout, and the session expired meanwhile."""
    target = ("127.0.0.1", zk_server.port)
    swallow = False
    held: list[asyncio.StreamWriter] = []
    links: list[asyncio.StreamWriter] = []
    tasks: set[asyncio.Task] = set()

    async def pipe(reader, writer, first=b""):
        with contextlib.suppress(OSError):
            if first:
                writer.write(first)
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def gate(reader, writer):
        tasks.add(asyncio.current_task())
        first = await reader.read(4)  # b"srvr", or the start of a ConnectRequest
        probe = first == b"srvr"
        if swallow and probe == (silent == "probe"):  # taken, never answered
            held.append(writer)
            return
        up_reader, up_writer = await asyncio.open_connection(*target)
        links.extend((writer, up_writer))
        await asyncio.gather(pipe(reader, up_writer, first), pipe(up_reader, writer))

    server = await asyncio.start_server(gate, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    timeout = 6.0
    zk = await ZkSession.connect(f"127.0.0.1:{port}", session_timeout_ms=int(timeout * 1000))
    assert zk.session_timeout_ms == timeout * 1000  # (the server did not negotiate it down)
    try:
        session = zk.session_id
        swallow = True
        cut = time.monotonic()
        for w in links:  # the connection drops; the next one is swallowed
            w.transport.abort()
        await asyncio.sleep(1.0)
        swallow = False  # the server answers again, but not on the connection it swallowed
        await asyncio.wait_for(zk.exists("/"), timeout * 2)
        back = time.monotonic() - cut
        assert held, "the gate swallowed nothing: the test did not test anything"
        assert zk.session_id == session and zk.connection.expiries == 0
        assert back < timeout * 0.9, f"reconnected {back:.1f} s after the cut: the client waited too long"
    finally:
        await zk.close()
        for w in held + links:
            w.transport.abort()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        server.close()
