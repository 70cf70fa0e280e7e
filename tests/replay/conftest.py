"""Journals shared by the replay tests (generated once per session)."""
from __future__ import annotations

import pytest

from replay import local
from replay.generate import generate


@pytest.fixture(scope="session")
def generated(tmp_path_factory):
    """A generated cluster life, in this process: 6,000 events over 240 partitions and three
    controllers, small segments (many fold units, mid-batch rolls, gz and plain segments).
    Returns (journal root, the world at the end)."""
    root = tmp_path_factory.mktemp("generated") / "journals"
    summary = generate(root, events=6000, partitions=240, seed=11, controllers=3, segment_bytes=40_000)
    return root, summary["world"]


@pytest.fixture(scope="session")
def replayed(generated):
    root, _ = generated
    return local.replay(root)
