"""The orjson writer of the digest's canonical JSON (adapters/journal/canonical.py) writes what
the codec writes (`codec.canonical_json`, the definition), on any value the codec produces:
str keys, ints, bools, None, text of any characters, lists and dicts. Hypothesis found the one
difference it had: orjson leaves DEL (0x7f) as it is, the codec escapes it."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller_core import codec

from adapters.journal import canonical as module

pytestmark = pytest.mark.skipif(module.canonical is None, reason="orjson is not installed")

VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1), st.text()),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_the_orjson_writer_writes_the_codecs_text(value):
    assert module.canonical(value) == codec.canonical_json(value)


def test_del_is_escaped_as_the_codec_escapes_it():
    assert module.canonical(["t\x7f"]) == codec.canonical_json(["t\x7f"]) == '["t\\u007f"]'
