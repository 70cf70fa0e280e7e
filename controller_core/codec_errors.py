"""The codec's error, `CodecError`, and the helpers that raise it.

Shared by controller_core/codec.py (the public API) and controller_core/codec_compiler.py (whose
generated decoders raise it through `_bad`, `_missing`, `_unknown` and `_build_failed`, and
append to its path while the error unwinds), so that neither imports the other.
"""
from __future__ import annotations

import typing
from typing import Any

# -- errors ---------------------------------------------------------------------------------------


class CodecError(ValueError):
    """A value that cannot be decoded (or encoded). `path` locates it, outermost first."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
        self._rpath: list = []  # innermost first: segments are appended while unwinding

    @property
    def path(self) -> tuple:
        return tuple(reversed(self._rpath))

    def __str__(self) -> str:
        if not self._rpath:
            return self.reason
        where = ""
        for seg in reversed(self._rpath):
            if isinstance(seg, int):
                where += f"[{seg}]"
            elif seg.startswith("["):
                where += seg
            else:
                where += f".{seg}" if where else seg
        return f"{where}: {self.reason}"


_JSON_NAMES = {
    dict: "object", list: "list", str: "str", int: "int", float: "float", bool: "bool", type(None): "null",
}


def _show(value: Any) -> str:
    kind = _JSON_NAMES.get(type(value), type(value).__name__)
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{kind} {text}"


def _bad(value: Any, expected: str) -> typing.NoReturn:
    raise CodecError(f"expected {expected}, got {_show(value)}")


def _missing(field: str) -> typing.NoReturn:
    raise CodecError(f"missing field {field!r}")


def _unknown(value: dict, known: tuple[str, ...]) -> typing.NoReturn:
    extra = sorted(str(k) for k in value if k not in known)
    raise CodecError(f"unknown field(s) {', '.join(map(repr, extra))} (known: {', '.join(known)})")


def _build_failed(cls: type, exc: Exception) -> typing.NoReturn:
    raise CodecError(f"cannot build {cls.__name__}: {exc}") from exc
