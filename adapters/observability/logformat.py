"""Log line formats: plain text, or one JSON object per line (`kctl node --log-format json`).

Every line carries the same four keys, `ts` (ms since the epoch), `level`, `logger` and
`message`, plus the structured fields of the record where it has them. Two kinds of records
carry fields:

- records whose message is a `Structured` value (the state-change log, the decision log): the
  value renders itself as text for the text format, and as a short `summary()` plus `fields()`
  for JSON, so a 10,000-partition list is a JSON array instead of a 100 KB message string;
- records logged with `extra={...}` naming one of `EXTRA_FIELDS`.

`Structured` messages are rendered only when a handler formats them, which for the state-change
log happens on its writer thread (adapters/observability/statelog.py), not on the controller's event loop.
"""
from __future__ import annotations

import json
import logging
import sys
import threading

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

EXTRA_FIELDS = ("controller_id", "controller_epoch", "event", "event_seq", "broker_id")
"""Record attributes (given with `extra=`) copied into JSON lines when present."""

_format = "text"


class Structured:
    """A log message that is also data. `str()` is the text line; `summary()` and `fields()`
    are its JSON form. Subclasses hold immutable values only, so that a handler on another
    thread may render them after the logging call returned."""

    __slots__ = ()

    def summary(self) -> str:
        return str(self)

    def fields(self) -> dict:
        return {}


class JsonFormatter(logging.Formatter):
    """One JSON object per record, newline-free (tracebacks become the `exc` string field)."""

    def format(self, record: logging.LogRecord) -> str:
        msg = record.msg
        out: dict = {"ts": round(record.created * 1000), "level": record.levelname, "logger": record.name}
        if isinstance(msg, Structured):
            out["message"] = msg.summary()
            for key, value in msg.fields().items():
                out.setdefault(key, value)
        else:
            out["message"] = record.getMessage()
        for key in EXTRA_FIELDS:
            if key not in out and key in record.__dict__:
                out[key] = record.__dict__[key]
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exc"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def formatter(fmt: str | None = None) -> logging.Formatter:
    """A new formatter for `fmt` ("text" or "json"; default: the process's format)."""
    if (fmt or _format) == "json":
        return JsonFormatter()
    return logging.Formatter(TEXT_FORMAT)


def current_format() -> str:
    """The process's log format, as `configure()` set it (files such as the state-change log
    follow it)."""
    return _format


def configure(fmt: str = "text", level: str = "INFO") -> None:
    """Route every log line of the process to stderr in `fmt`. With JSON, warnings and
    uncaught exceptions (of the main thread and of other threads) are logged too, so that
    stderr holds nothing but JSON lines."""
    global _format
    if fmt not in ("text", "json"):
        raise ValueError(f"log format must be text or json, got {fmt!r}")
    _format = fmt
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(fmt))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    if fmt == "json":
        logging.captureWarnings(True)
        sys.excepthook = _log_uncaught
        threading.excepthook = _log_thread_uncaught


def _log_uncaught(kind, value, tb) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, value, tb)
        return
    logging.getLogger("kctl").critical("uncaught %s: %s", kind.__name__, value, exc_info=(kind, value, tb))


def _log_thread_uncaught(args) -> None:
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    logging.getLogger("kctl").critical("uncaught %s in thread %s: %s", args.exc_type.__name__, name, args.exc_value,
                                       exc_info=(args.exc_type, args.exc_value, args.exc_traceback))

