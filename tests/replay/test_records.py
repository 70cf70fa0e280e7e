"""The replay's record reader (replay/records.py): the journal format's check, parsed by orjson
where orjson gives json's value, and by json otherwise (same values, same reasons)."""
from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import pytest

from adapters.journal import format as journal_format
from adapters.journal.format import InvalidRecord
from replay import records

GOLDEN = Path(__file__).parent / "golden"


def _line(rest: bytes) -> bytes:
    """A line with a valid checksum around any text `rest` (the JSON object without its "{")."""
    return b'{"crc":"%08x",' % zlib.crc32(b"{" + rest) + rest


@pytest.mark.parametrize("text", [
    b"18446744073709551615", b"18446744073709551616", b"-9223372036854775808", b"-9223372036854775809",
    b"123456789012345678901234567890", b"-0", b"1.5", b"1e400", b"-1e400", b"NaN", b"Infinity",
    b'"\\ud800"', b'"caf\\u00e9"', b'{"a":1,"a":2}', b"[" * 50 + b"]" * 50, b"0.1", b"5e-324",
    b'"segment-00000000000000000001"', b"1" * 19, b"-" + b"1" * 18,
])
def test_loads_gives_json_values_and_types(text):
    expected = json.loads(text)
    got = records.loads(text)
    assert repr(got) == repr(expected)  # repr: an int must not come back a float (nor NaN compare)


@pytest.mark.parametrize("text", [b"", b"{", b"[1,]", b"\xff", b'{"a":01}', b"tru", b'"\x01"'])
def test_loads_refuses_what_json_refuses_with_its_message(text):
    with pytest.raises(ValueError) as expected:
        json.loads(text)
    with pytest.raises(ValueError) as got:
        records.loads(text)
    assert str(got.value) == str(expected.value)


def test_a_bad_line_has_the_same_reason():
    for rest in (b'"seq":1,"x":}', b'"seq":1}', b'"seq":1.0,"controller_id":1,"controller_epoch":0,"at":1,'
                 b'"type":"event","v":1,"body":{}}',
                 b'"seq":99999999999999999999999,"controller_id":1,"controller_epoch":0,"at":1,"type":"e","v":1,'
                 b'"body":{}}'):
        line = _line(rest)
        try:
            expected = journal_format.verify_line(line)
        except InvalidRecord as exc:
            with pytest.raises(InvalidRecord) as got:
                records.verify_line(line)
            assert got.value.reason == exc.reason
        else:
            assert repr(records.verify_line(line)) == repr(expected)


def test_every_golden_line_reads_the_same():
    n = 0
    for path in sorted(GOLDEN.rglob("segment-*")):
        data = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
        for raw in data.split(b"\n")[:-1]:
            try:
                expected = journal_format.verify_line(raw)
            except InvalidRecord:
                continue
            assert records.verify_line(raw) == expected
            n += 1
    assert n > 1000
