"""The replay's central rules fire: divergences planted with valid checksums (so only the
re-execution or the unit-boundary comparison can see them) are reported with the journal, file,
line and seq of the record at fault, and fail the audit.

Each plant keeps the journal readable and gap-free: a record is rewritten in place with a fresh
checksum (`helpers.rewrite`), as a controller that decided differently would have written it.
"""
from __future__ import annotations

import pytest

from controller_core import codec
from replay import local
from replay.fold import UnitFold
from adapters.journal.format import list_segments

from .helpers import copy_tree, records, rewrite


def violations(result):
    return sorted((f["rule"], f["journal"], f["file"], f["line"], f["seq"]) for f in result.findings
                  if f["severity"] == "violation")


@pytest.fixture(scope="module")
def decided(generated):
    """The commands the replay recomputes for every event that has an effects record, keyed by
    (journal, event seq): what a planted effects record is built from."""
    root, _ = generated
    commands: dict[tuple[str, int], list] = {}
    real = UnitFold._event

    def spy(self, rec, file, line):
        real(self, rec, file, line)
        pending = self._pending.get(rec["seq"])
        if pending is not None:
            commands[(self.journal, rec["seq"])] = pending[5]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(UnitFold, "_event", spy)
        result = local.replay(root)
    assert violations(result) == []
    return commands


def _locate(root, journal, event_seq):
    """(event path, event line, effects path, effects line, effects record) of one event."""
    event = effects = None
    for path, line, rec in records(root / journal):
        if rec["type"] == "event" and rec["seq"] == event_seq:
            event = (path, line)
        elif rec["type"] == "effects" and rec["body"].get("event_seq") == event_seq:
            effects = (path, line, rec)
    assert event is not None and effects is not None, (journal, event_seq)
    return (*event, *effects)


def _busiest(decided, root, distinct=True):
    """The checked event with the most commands (at least two, in an order that matters)."""
    for (journal, seq), cmds in sorted(decided.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        if len(cmds) < 2 or (distinct and codec.digest(cmds[::-1]) == codec.digest(cmds)):
            continue
        return journal, seq, cmds, _locate(root, journal, seq)
    pytest.fail("the generated life has no event with two distinct commands")


def _expect_one_reexecution(result, journal, seq, event_path, event_line):
    assert violations(result) == [("re-execution", journal, str(event_path), event_line, seq)]
    bad = [f for f in result.findings if f["rule"] == "re-execution"]
    assert not result.passed
    events = [e for e in result.tables["events"] if e["journal"] == journal and e["seq"] == seq]
    assert [e["digest_ok"] for e in events] == [False]
    return bad[0]


def test_an_effects_digest_the_step_cannot_reproduce(generated, decided, tmp_path):
    root = copy_tree(generated[0], tmp_path / "j")
    journal, seq, cmds, (epath, eline, fpath, fline, effects) = _busiest(decided, root)
    # the same commands in another order: same count, a digest step() does not give
    effects["body"]["digest"] = codec.digest(cmds[::-1])
    rewrite(fpath, fline, effects)
    f = _expect_one_reexecution(local.replay(root), journal, seq, epath, eline)
    assert f"re-executes to {len(cmds)} command(s)" in f["detail"]
    assert f"recorded {len(cmds)} (digest {effects['body']['digest'][:12]}" in f["detail"]


def test_a_command_dropped_from_an_effects_record(generated, decided, tmp_path):
    root = copy_tree(generated[0], tmp_path / "j")
    journal, seq, cmds, (epath, eline, fpath, fline, effects) = _busiest(decided, root, distinct=False)
    # a consistent record of one command fewer: count and digest agree with each other
    effects["body"]["count"] = len(cmds) - 1
    effects["body"]["digest"] = codec.digest(cmds[:-1])
    rewrite(fpath, fline, effects)
    f = _expect_one_reexecution(local.replay(root), journal, seq, epath, eline)
    assert f"re-executes to {len(cmds)} command(s)" in f["detail"]
    assert f"recorded {len(cmds) - 1} (digest" in f["detail"]


def test_an_effects_record_of_another_epoch(generated, decided, tmp_path):
    """Same commands, but recorded under an epoch the replayed state did not hold."""
    root = copy_tree(generated[0], tmp_path / "j")
    journal, seq, cmds, (epath, eline, fpath, fline, effects) = _busiest(decided, root, distinct=False)
    real_epoch = effects["controller_epoch"]
    effects["controller_epoch"] = real_epoch + 1
    rewrite(fpath, fline, effects)
    f = _expect_one_reexecution(local.replay(root), journal, seq, epath, eline)
    assert f"epoch {real_epoch})" in f["detail"] and f"epoch {real_epoch + 1})" in f["detail"]


def test_a_snapshot_head_that_differs_from_the_fold_before_it(generated, tmp_path):
    root = copy_tree(generated[0], tmp_path / "j")
    # the head of a journal's last unit (no unit after it for the planted state to leak into),
    # of a controller that holds a term (a fresh state would be taken for a process restart)
    journal = max((d.name for d in root.iterdir() if d.is_dir()), key=lambda n: len(list_segments(root / n)))
    last = list_segments(root / journal)[-1].path
    path, line, head = next((p, n, rec) for p, n, rec in records(root / journal) if p == last)
    assert head["type"] == "snapshot" and head["body"]["state"]["active"], (journal, last)
    assert line == 1
    head["body"]["state"]["next_write_id"] += 1000
    rewrite(path, 1, head)
    result = local.replay(root)
    bad = [f for f in result.findings if f["rule"] == "snapshot-mismatch"]
    assert [(f["journal"], f["file"], f["line"], f["seq"], f["severity"]) for f in bad] == [
        (journal, str(path), 1, head["seq"], "violation")]
    assert bad[0]["detail"].endswith("differs from the snapshot at seq %d in: next_write_id" % head["seq"])
    assert not result.passed

