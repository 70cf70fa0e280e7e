"""`kctl replay` argument handling: bad input is one UsageError line (exit 2), before Spark starts."""
from __future__ import annotations

import argparse

import pytest

from adapters.cli.errors import Parser as _Parser, UsageError
from adapters.cli.replay import add_replay_command, cmd_replay


def parse(*argv):
    parser = _Parser(prog="kctl")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    add_replay_command(sub)
    return parser.parse_args(["replay", *argv])


def test_required_flags():
    with pytest.raises(UsageError, match="--journal"):
        parse("--out", "x")
    args = parse("--journal", "j", "--out", "o")
    assert args.func is cmd_replay and args.master and args.hash_seed == "0"


@pytest.mark.parametrize("setup, message", [
    (lambda tmp: None, "does not exist"),
    (lambda tmp: (tmp / "j").write_text("x"), "is not a directory"),
    (lambda tmp: (tmp / "j").mkdir(), "no journal segments"),
])
def test_bad_journal(tmp_path, setup, message):
    setup(tmp_path)
    with pytest.raises(UsageError, match=message) as exc:
        cmd_replay(parse("--journal", str(tmp_path / "j"), "--out", str(tmp_path / "o")))
    assert "\n" not in str(exc.value)


def test_bad_out_and_hash_seed(tmp_path):
    journal = tmp_path / "j" / "node-1"
    journal.mkdir(parents=True)
    (journal / "segment-00000000000000000001.jsonl").write_text("")
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="not a directory"):
        cmd_replay(parse("--journal", str(tmp_path / "j"), "--out", str(tmp_path / "file")))
    with pytest.raises(UsageError, match="--hash-seed"):
        cmd_replay(parse("--journal", str(tmp_path / "j"), "--out", str(tmp_path / "o"), "--hash-seed", "x"))
    assert isinstance(parse("--journal", "j", "--out", "o"), argparse.Namespace)


def test_follow_flags(tmp_path):
    args = parse("--journal", "j", "--out", "o", "--follow")
    assert args.follow and not args.full and args.poll_seconds == 2.0
    with pytest.raises(UsageError, match="--poll-seconds"):
        parse("--journal", "j", "--out", "o", "--follow", "--poll-seconds", "soon")
    journal = tmp_path / "j" / "node-1"
    journal.mkdir(parents=True)
    (journal / "segment-00000000000000000001.jsonl").write_text("")
    with pytest.raises(UsageError, match="--poll-seconds must be positive, got 0.0"):
        cmd_replay(parse("--journal", str(tmp_path / "j"), "--out", str(tmp_path / "o"), "--follow",
                         "--poll-seconds", "0"))
