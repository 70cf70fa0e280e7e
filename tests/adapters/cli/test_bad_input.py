"""Garbage into `kctl` flags and JSON files: always one `error: ...` line on stderr, exit 2, no
traceback, and nothing written to ZooKeeper.

Most cases run `adapters.cli.main([...])` in this process (fast); a few run the real `kctl`
console script in a subprocess, the way an operator would.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.cli import main
from adapters.zookeeper.session import ZkSession

KCTL = str(Path(sys.executable).with_name("kctl"))
UNREACHABLE = "127.0.0.1:1"  # nothing listens there: a case that gets that far would be a bug


def run(capsys, argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error_line(code: int, err: str, expected: str = "", exit_code: int = 2) -> None:
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert code == exit_code and len(lines) == 1 and lines[0].startswith("error: "), (code, err)
    assert expected in lines[0], (expected, lines[0])


@pytest.fixture
def files(tmp_path):
    """Write `content` to a file of the test directory and return its path."""
    def write(name: str, content: bytes | str) -> str:
        path = tmp_path / name
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        return str(path)
    return write


# -- flags that are refused before anything is contacted --------------------------------------

NODE = ["node", "--zookeeper", UNREACHABLE, "--broker-id", "1"]
TOPICS = ["topics", "--zookeeper", UNREACHABLE]

FLAG_GARBAGE = [
    ([], "a command is required"),
    (["frobnicate"], "invalid choice"),
    (["node", "--broker-id", "one"], "invalid int value"),
    (["node", "--zookeeper", UNREACHABLE, "--broker-id", "-4"], "--broker-id"),
    (["node", "--zookeeper", UNREACHABLE, "--broker-id", str(2**31)], "32-bit"),
    (NODE + ["--listen", "localhost"], "--listen must be HOST:PORT"),
    (NODE + ["--listen", "h:70000"], "--listen must be HOST:PORT"),
    (NODE + ["--rack", " "], "--rack must not be empty"),
    (NODE + ["--metrics-port", "-1"], "--metrics-port"),
    (["node", "--broker-id", "1", "--zookeeper", "host:port:x"], "connect string"),
    (["node", "--broker-id", "1", "--zookeeper", "127.0.0.1:2181/a//b"], "chroot"),
    (NODE + ["--set", "novalue"], "--set expects key=value"),
    (NODE + ["--set", "=x"], "--set expects key=value"),
    (NODE + ["--set", "no.such.key=1"], "unknown configuration key 'no.such.key'"),
    (NODE + ["--set", "zookeeper.session.timeout.ms=soon"], "non-negative 32-bit integer"),
    (NODE + ["--set", "zookeeper.session.timeout.ms=-1"], "non-negative 32-bit integer"),
    (NODE + ["--set", "zookeeper.session.timeout.ms=99999999999999999999"], "non-negative 32-bit integer"),
    (NODE + ["--set", "unclean.leader.election.enable=yes"], "must be true or false"),
    (NODE + ["--set", "process.roles=controller"], "process.roles"),
    (NODE + ["--set", "journal.fsync=sometimes"], "journal.fsync"),
    (NODE + ["--set", "control.secret="], "control.secret must not be empty"),
    (NODE + ["--set", "zookeeper.auth=nocolon"], "USER:PASSWORD"),
    (NODE + ["--set", "zookeeper.set.acl=true"], "zookeeper.set.acl=true needs credentials"),
    (TOPICS + ["--create", "--topic", "t", "--list"], "not allowed with argument"),
    (TOPICS + ["--create", "--partitions", "1", "--replication-factor", "1"], "--create requires --topic"),
    (TOPICS + ["--create", "--topic", "bad name!", "--partitions", "1", "--replication-factor", "1"], "illegal"),
    (TOPICS + ["--create", "--topic", "x" * 250, "--partitions", "1", "--replication-factor", "1"], "longer than 249"),
    (TOPICS + ["--create", "--topic", "..", "--partitions", "1", "--replication-factor", "1"], '"." or ".."'),
    (TOPICS + ["--create", "--topic", "t", "--partitions", "many", "--replication-factor", "1"], "invalid int"),
    (TOPICS + ["--create", "--topic", "t", "--partitions", "1"], "--replication-factor"),
    (TOPICS + ["--create", "--topic", "t", "--replica-assignment", "1:x"], "is not a broker id"),
    (TOPICS + ["--create", "--topic", "t", "--replica-assignment", "1:1"], "duplicate"),
    (TOPICS + ["--create", "--topic", "t", "--replica-assignment", "1:2,3"], "different replication factor"),
    (TOPICS + ["--create", "--topic", "t", "--replica-assignment", "99999999999"], "is not a broker id"),
    (TOPICS + ["--create", "--topic", "t", "--replica-assignment", "1", "--partitions", "2"], "--partitions"),
    (TOPICS + ["--create", "--topic", "t", "--partitions", "1", "--replication-factor", "1",
               "--config", "retention.ms=forever"], "Not a number of type LONG"),
    (TOPICS + ["--create", "--topic", "t", "--partitions", "1", "--replication-factor", "1",
               "--config", "no.such.config=1"], "Unknown topic config name"),
    (TOPICS + ["--create", "--topic", "t", "--partitions", "1", "--replication-factor", "1",
               "--config", "novalue"], "key=val"),
    (TOPICS + ["--alter", "--topic", "t"], "--alter requires"),
    (TOPICS + ["--describe", "--partitions", "3"], "can't be used with --describe"),
    (["reassign-partitions", "--zookeeper", UNREACHABLE, "--execute"], "--reassignment-json-file"),
    (["reassign-partitions", "--zookeeper", UNREACHABLE, "--generate", "--broker-list", "1"],
     "--topics-to-move-json-file"),
    (["leader-election", "--zookeeper", UNREACHABLE, "--election-type", "sideways", "--all-topic-partitions"],
     "invalid choice"),
    (["leader-election", "--zookeeper", UNREACHABLE, "--election-type", "preferred"], "One and only one"),
    (["leader-election", "--zookeeper", UNREACHABLE, "--election-type", "preferred", "--topic", "t"],
     "partition"),
    (["leader-election", "--zookeeper", UNREACHABLE, "--election-type", "preferred", "--topic", "t",
      "--partition", "-1"], "non-negative"),
    (["leader-election", "--zookeeper", UNREACHABLE, "--election-type", "preferred", "--all-topic-partitions",
      "--timeout-ms", "0"], "--timeout-ms"),
    (["cluster", "--zookeeper", "127.0.0.1:2181/a/../b"], "chroot"),
    (["cluster", "--zookeeper", UNREACHABLE, "--zk-auth", "nocolon"], "--zk-auth must be USER:PASSWORD"),
]


@pytest.mark.parametrize("argv,expected", FLAG_GARBAGE, ids=[" ".join(a[:1] + a[-2:]) or "empty" for a, _ in
                                                             FLAG_GARBAGE])
def test_garbage_flags_give_one_error_line_and_exit_2(capsys, argv, expected):
    code, out, err = run(capsys, argv)
    assert_one_error_line(code, err, expected)


def test_garbage_node_config_files(capsys, files):
    cases = [
        (b"\xff\xfe=1\n", "not UTF-8 text"),
        (b"# comment\nzookeeper.session.timeout.ms\n", ":2: expected key=value"),
        (b" = value\n", ":1: expected key=value"),
        (b"delete.topic.enable=maybe\n", "must be true or false"),
        (b"control.secret=\n", "control.secret must not be empty"),
    ]
    for content, expected in cases:
        code, _, err = run(capsys, NODE + ["--config", files("node.properties", content)])
        assert_one_error_line(code, err, expected)
    code, _, err = run(capsys, NODE + ["--config", str(Path(files("x", b"")).parent / "missing.properties")])
    assert_one_error_line(code, err, "No such file")


# -- JSON files and flags that need the cluster's data -----------------------------------------


def test_garbage_json_files_give_one_error_line(capsys, files, zk_connect):
    zk = ["--zookeeper", zk_connect]
    reassign = ["reassign-partitions", *zk, "--execute", "--reassignment-json-file"]
    elect = ["leader-election", *zk, "--election-type", "preferred", "--path-to-json-file"]
    generate = ["reassign-partitions", *zk, "--generate", "--broker-list", "1,2", "--topics-to-move-json-file"]
    cases = [
        (reassign, b"", "input.json is empty (expected a JSON document)"),  # a file, not a znode
        (elect, b" \n", "input.json is empty (expected a JSON document)"),
        (generate, b"", "input.json is empty (expected a JSON document)"),
        (reassign, b"\xff", "not valid UTF-8"),
        (reassign, b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,"2"]}]}',
         "must be a list of integers"),
        (reassign, b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":[]}]}',
         "log_dirs has 0 entries"),
        (reassign, b'{"version":1,"partitions":[]}', "Partition reassignment data file is empty"),
        (reassign, b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[]}]}',
         "Partition replica list cannot be empty"),
        (reassign, b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}',
         "duplicate entries"),
        (reassign, zkdata.encode_reassignment_file({zkdata.TopicPartition("ghost", 0): [1]}), "non-existent partitions"),
        (reassign, b"[" * 100_000, "not valid JSON"),
        (elect, b'{"partitions":[{"topic":"t","partition":0},{"topic":"t","partition":0}]}', "twice"),
        (elect, b'{"partitions":[]}', "lists no partitions"),
        (elect, b'{"partitions":[{"topic":"ghost","partition":0}]}', "Unknown topic partition"),
        (generate, b'{"version":1,"topics":[{"name":"t"}]}', "topics[0].topic is missing"),
        (generate, b'{"version":1,"topics":[{"topic":"ghost"}]}', "do not exist"),
    ]
    for argv, content, expected in cases:
        code, out, err = run(capsys, argv + [files("input.json", content)])
        assert_one_error_line(code, err, expected)
    code, _, err = run(capsys, ["topics", *zk, "--create", "--topic", "t", "--replica-assignment", "1:2"])
    assert_one_error_line(code, err, "Unknown broker(s) in replica assignment: 1,2")
    code, _, err = run(capsys, ["topics", *zk, "--create", "--topic", "t", "--partitions", "1",
                                "--replication-factor", "3"])
    assert_one_error_line(code, err, "")  # no broker is registered: placement is impossible
    code, _, err = run(capsys, ["topics", *zk, "--alter", "--topic", "ghost", "--partitions", "2"])
    assert_one_error_line(code, err, "does not exist")


async def test_nothing_was_written_by_the_refused_commands(zk_connect, capsys, files):
    # the same refusals on a chroot, then the chroot is checked: only what `kctl` reads exists
    zk = ["--zookeeper", zk_connect]
    for argv in (["topics", *zk, "--create", "--topic", "t", "--replica-assignment", "1:2"],
                 ["reassign-partitions", *zk, "--execute", "--reassignment-json-file",
                  files("r.json", b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]}]}')]):
        code = await _in_thread(main, argv)
        assert code == 2
    admin = await ZkSession.connect(zk_connect)
    try:
        for path in (zkpaths.topic("t"), zkpaths.config_topic("t"), zkpaths.REASSIGN_PARTITIONS):
            assert await admin.exists(path) is None, path
    finally:
        await admin.close()


async def _in_thread(func, *args):
    import asyncio

    return await asyncio.to_thread(func, *args)  # main() runs its own event loop


# -- generated garbage ------------------------------------------------------------------------

GENERATED = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])

tokens = (st.sampled_from(["--topic", "--partitions", "--replication-factor", "--replica-assignment", "--config",
                           "--delete-config", "--if-exists", "--if-not-exists", "--under-replicated-partitions",
                           "--broker-list", "--election-type", "--partition", "--all-topic-partitions",
                           "--timeout-ms", "--zk-auth", "-1", "0", "1:2", "t", "x=y", ""])
          | st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=6))
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=6),
                           lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=9), kids,
                                                                                    max_size=3), max_leaves=8)
file_contents = (st.binary(max_size=40) | json_values.map(lambda v: json.dumps(v).encode())
                 | st.fixed_dictionaries({"partitions": st.lists(st.fixed_dictionaries(
                     {"topic": st.sampled_from(["t", "u"]) | json_values, "partition": st.integers(-1, 2) | json_values},
                     optional={"replicas": st.lists(st.integers(-1, 3), max_size=3) | json_values}), max_size=3)},
                     optional={"version": st.integers(0, 2) | json_values}).map(lambda v: json.dumps(v).encode()))


@GENERATED
@given(command=st.sampled_from(["topics", "leader-election", "reassign-partitions", "cluster"]),
       args=st.lists(tokens, max_size=6))
def test_generated_flags_never_give_a_traceback(capsys, zk_connect, command, args):
    code, out, err = run(capsys, [command, "--zookeeper", zk_connect, *args])
    assert "Traceback" not in err
    assert code in (0, 1, 2)
    if code != 0:
        assert_one_error_line(code, err, exit_code=code)


@GENERATED
@given(content=file_contents, which=st.sampled_from(["reassign", "elect", "generate"]))
def test_generated_json_files_are_refused_with_one_line(capsys, files, zk_connect, content, which):
    # the chroot is empty: no file can name an existing partition or topic, so all are refused
    argv = {"reassign": ["reassign-partitions", "--execute", "--reassignment-json-file"],
            "elect": ["leader-election", "--election-type", "preferred", "--path-to-json-file"],
            "generate": ["reassign-partitions", "--generate", "--broker-list", "1", "--topics-to-move-json-file"],
            }[which]
    code, _, err = run(capsys, [argv[0], "--zookeeper", zk_connect, *argv[1:], files("in.json", content)])
    assert_one_error_line(code, err)


# -- the real console script ------------------------------------------------------------------


def kctl(*argv, env=None, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run([KCTL, *argv], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_the_console_script_refuses_garbage_with_one_line(files):
    done = kctl("reassign-partitions", "--zookeeper", UNREACHABLE, "--execute", "--reassignment-json-file",
                files("r.json", b'{"version":1,"partitions":[{"topic":7}]}'))
    assert_one_error_line(done.returncode, done.stderr, "partitions[0].topic must be a string")
    assert done.stdout == ""
    done = kctl("node", "--broker-id", "1", "--zookeeper", UNREACHABLE, "--config",
                files("node.properties", b"zookeeper.set.acl=true\n"))
    assert_one_error_line(done.returncode, done.stderr, "needs credentials")
    done = kctl("topics", "--zookeeper", UNREACHABLE, "--create", "--topic", "t", "--partitions", "1",
                "--replication-factor", "1", env={"KCTL_ZOOKEEPER_AUTH": "no-colon"})
    assert_one_error_line(done.returncode, done.stderr, "--zk-auth must be USER:PASSWORD")


def test_module_entry_point_reports_a_subcommands_bad_flag_in_one_line():
    """`python -m adapters.cli` loads the module twice (as __main__ and as adapters.cli); a bad
    flag raised by a subcommand module must still be one `error:` line and exit 2."""
    proc = subprocess.run([sys.executable, "-m", "adapters.cli", "chaos", "--duration", "-5"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == ["error: --duration must be above 0 and at most 604800, got -5"]
