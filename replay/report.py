"""The report a person reads: `report.html` with the verdict, the findings, the controller
terms, broker failures and four PNG charts (matplotlib, no display needed), and a text summary
for the terminal. Works on small, already aggregated inputs (both `replay.job` and
`replay.local` produce them)."""
from __future__ import annotations

import datetime as _dt
import html
from pathlib import Path

from . import history

SAMPLE = 200  # findings shown in the page (all of them are in the findings table)


def _when(ms) -> str:
    if ms is None:
        return "-"
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _fmt_ms(v) -> str:
    return "-" if v is None else f"{v:,.0f} ms"


def _fmt_fine_ms(v) -> str:
    """Milliseconds for times well under one (an event's processing: 0.3 ms, 12.4 ms)."""
    return "-" if v is None else (f"{v:,.2f} ms" if v < 10 else f"{v:,.1f} ms")


PRINTED = 20  # violations listed in the terminal summary (all of them are in the findings table)


def where(f: dict) -> str:
    """Where a finding points: `journal/segment-....jsonl[.gz]:line` and its seq, as far as known."""
    journal = f.get("journal")
    file = f.get("file")
    if file:
        base = str(file).rsplit("/", 1)[-1]
        place = base if journal in (None, ".") else f"{journal}/{base}"
        if f.get("line"):
            place += f":{f['line']}"
    else:
        place = journal or "(cluster)"
    if f.get("seq") is not None:
        place += f" seq {f['seq']}"
    return place


def violation_lines(sample: list[dict], total: int, limit: int = PRINTED) -> list[str]:
    """The first `limit` violations (rule, journal, file:line, seq, detail), then how many more."""
    shown = [f for f in sample if f.get("severity") == "violation"][:limit]
    out = [f"  {f['rule']}: {where(f)}: {f.get('detail') or ''}" for f in shown]
    if total > len(shown):
        out.append(f"  ... and {total - len(shown):,} more violation(s) (every finding is in the findings table)")
    return out


def summary_text(stats: dict, counts: list[tuple[str, str, int]], passed: bool, sample: list[dict] = ()) -> str:
    lines = [f"replay: {stats.get('events', 0):,} events from {stats.get('journals', 0)} journal(s), "
             f"{stats.get('segments', 0)} segment(s), {stats.get('units', 0)} fold unit(s)"]
    if stats.get("step_seconds"):
        lines.append(f"re-execution: {stats['step_seconds']:.2f} s of step()+digest, "
                     f"{stats['events'] / stats['step_seconds']:,.0f} events/s per core")
    inc = stats.get("incremental")
    if inc and inc.get("units_reused"):
        lines.append(f"incremental: re-executed {inc['units_executed']:,} of {stats.get('units', 0):,} fold unit(s) "
                     f"({inc['events_executed']:,} events), {inc['segments_read']:,} new or changed segment(s) read, "
                     f"{inc['segments_reused']:,} reused from the checkpoint")
    if stats.get("wall_seconds") is not None:
        lines.append(f"wall time: {stats['wall_seconds']:.1f} s")
    off = stats.get("offline_ms_per_partition") or {}
    rec = stats.get("recovery_ms_per_failure") or {}
    lines.append(f"offline time per partition: median {_fmt_ms(off.get('median'))}, p99 {_fmt_ms(off.get('p99'))}, "
                 f"max {_fmt_ms(off.get('max'))} ({off.get('count', 0)} partitions)")
    lines.append(f"time to recover after a broker failure: median {_fmt_ms(rec.get('median'))}, "
                 f"p99 {_fmt_ms(rec.get('p99'))}, max {_fmt_ms(rec.get('max'))} ({rec.get('count', 0)} failures)")
    live, queue = stats.get("process_ms_per_event") or {}, stats.get("queue_ms_per_event") or {}
    if live.get("count"):
        lines.append(f"live processing time per event (as journaled): median {_fmt_fine_ms(live.get('median'))}, "
                     f"p99 {_fmt_fine_ms(live.get('p99'))}, max {_fmt_fine_ms(live.get('max'))} "
                     f"({live['count']:,} events); in the queue: median {_fmt_fine_ms(queue.get('median'))}, "
                     f"p99 {_fmt_fine_ms(queue.get('p99'))}")
    for severity, rule, n in counts:
        lines.append(f"  {severity:9} {rule:28} {n:>8,}")
    total = sum(n for severity, _, n in counts if severity == "violation")
    if total:
        lines.append("violations:")
        lines += violation_lines(_ordered(sample), total)
    lines.append("verdict: PASS" if passed else "verdict: FAIL (violations found)")
    return "\n".join(lines)


def _ordered(findings) -> list[dict]:
    order = {s: k for k, s in enumerate(history.SEVERITIES)}
    return sorted(findings, key=lambda f: (order.get(f["severity"], 9), f.get("journal") or "", f.get("seq") or 0,
                                           f.get("file") or "", f.get("line") or 0))


def processing_points(xs: list, values: list) -> list[tuple]:
    """(x, value) of the chart buckets that hold a measurement."""
    return [(x, v) for x, v in zip(xs, values) if v is not None and v == v]


def _charts(out: Path, series: dict) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    buckets = series.get("buckets") or []
    if not buckets:
        return []
    t0 = buckets[0] - series.get("bucket_ms", 1)
    xs = [(b - t0) / 1000 for b in buckets]
    charts = []

    def save(name, title, draw, ylabel):
        fig, ax = plt.subplots(figsize=(9, 3.2), dpi=100)
        draw(ax)
        ax.set_title(title)
        ax.set_xlabel(f"seconds since {_when(t0)} UTC")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        fig.tight_layout(rect=(0, 0, 0.86, 1) if name == "leaders_per_broker.png" else None)
        fig.savefig(out / name)
        plt.close(fig)
        charts.append((name, title))

    save("offline_partitions.png", "Offline partitions (no leader, or leader's broker down)",
         lambda ax: ax.step(xs, series.get("offline", [0] * len(xs)), where="post", color="#c0392b"), "partitions")

    def leaders(ax):
        # stacked bands: brokers often lead the same number of partitions, and lines drawn one
        # over another hide all but the last
        per = sorted(series.get("leaders", {}).items(), key=lambda kv: int(kv[0]))
        if per:
            ax.stackplot(xs, *[[max(0, v) for v in values] for _, values in per], step="post",
                         labels=[f"broker {b}" for b, _ in per], alpha=0.85)
            ax.legend(fontsize=7, ncol=1 + len(per) // 12, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    save("leaders_per_broker.png", "Partitions led per broker (stacked)", leaders, "partitions")
    width_s = series.get("bucket_ms", 1000) / 1000
    save("event_rate.png", "Controller events per second (all journals)",
         lambda ax: ax.plot(xs, [n / width_s for n in series.get("events", [])], color="#2c3e50"), "events/s")

    def timing(ax):
        # only the buckets that hold events: an idle bucket is no measurement, and NaN gaps
        # between them broke the lines into scattered fragments. The live controller's times
        # (journaled in its effects records) where the journals have them, then the replay's
        # re-execution of the same events
        for name, label in (("live_process_us_p50", "live p50 (journal, step, execute)"),
                            ("live_process_us_p99", "live p99"),
                            ("replay_us_p50", "replay p50 (step, digest)"), ("replay_us_p99", "replay p99")):
            pts = processing_points(xs, series.get(name, []))
            if pts:
                ax.plot([x for x, _ in pts], [y for _, y in pts], marker=".", markersize=3, linewidth=1, label=label)
        ax.set_yscale("log")
        if ax.lines:
            ax.legend(fontsize=7)
    save("processing_time.png", "Processing time per event (µs): live and re-executed", timing, "µs")
    return charts


def _table(header: str, rows: str) -> str:
    """A table, or "none" when it has no rows (a bare header row reads like missing data)."""
    if not rows:
        return "<p class='none'>none</p>"
    return f"<table>{header}{rows}</table>"


def write_report(out: Path, *, stats: dict, counts: list[tuple[str, str, int]], sample: list[dict], series: dict,
                 terms: list[dict], failures: list[dict], passed: bool, tables: dict[str, str] | None = None,
                 shutdowns: list[dict] = ()) -> Path:
    """`shutdowns`: the broker intervals of controlled shutdowns (listed apart from failures)."""
    out.mkdir(parents=True, exist_ok=True)
    charts = _charts(out, series)
    e = html.escape
    verdict = ("<p class='pass'>PASS: no rule was violated</p>" if passed else
               "<p class='fail'>FAIL: the audit found violations</p>")
    rows = "".join(f"<tr><td>{e(s)}</td><td>{e(r)}</td><td>{n:,}</td></tr>" for s, r, n in counts)
    shown = _ordered(sample)[:SAMPLE]
    frows = "".join(
        f"<tr class='{e(f['severity'])}'><td>{e(f['severity'])}</td><td>{e(f['rule'])}</td>"
        f"<td>{e(str(f.get('journal') or ''))}</td><td>{e(str(f.get('file') or '').rsplit('/', 1)[-1])}"
        f"{':' + str(f['line']) if f.get('line') else ''}</td><td>{f.get('seq') if f.get('seq') is not None else ''}</td>"
        f"<td>{e(str(f.get('topic') or ''))}{'-' + str(f['partition']) if f.get('partition') is not None else ''}</td>"
        f"<td>{e(f['detail'])}</td></tr>" for f in shown)
    trows = "".join(
        f"<tr><td>{t['epoch']}</td><td>{t['controller_id']}</td><td>{e(str(t['journal']))}</td><td>{_when(t['start'])}</td>"
        f"<td>{_when(t['end'])}</td><td>{e(str(t.get('reason') or ''))}</td></tr>" for t in terms)
    rrows = "".join(
        f"<tr><td>{f['broker']}</td><td>{_when(f['time'])}</td><td>{f.get('partitions', 0)}</td>"
        f"<td>{_fmt_ms(f.get('recovery_ms'))}</td><td>{f.get('unrecovered', 0)}</td></tr>" for f in failures)
    srows = "".join(
        f"<tr><td>{s['broker']}</td><td>{_when(s['start'])}</td><td>{_when(s.get('end'))}</td></tr>"
        for s in sorted(shutdowns, key=lambda s: (s["start"], s["broker"])))
    off = stats.get("offline_ms_per_partition") or {}
    rec = stats.get("recovery_ms_per_failure") or {}
    live, queue = stats.get("process_ms_per_event") or {}, stats.get("queue_ms_per_event") or {}
    imgs = "".join(f"<h3>{e(title)}</h3><img src='{name}' alt='{e(title)}'>" for name, title in charts)
    table_list = "".join(f"<li><code>{e(name)}/</code>: {e(desc)}</li>" for name, desc in (tables or {}).items())
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>kctl replay audit</title>
<style>
body {{ font-family: sans-serif; margin: 2em; max-width: 1200px; }}
table {{ border-collapse: collapse; font-size: 13px; }} td, th {{ border: 1px solid #ccc; padding: 3px 6px; }}
.pass {{ color: #1e8449; font-size: 1.6em; font-weight: bold; }} .fail {{ color: #c0392b; font-size: 1.6em; font-weight: bold; }}
tr.violation td:first-child {{ color: #c0392b; font-weight: bold; }} tr.warning td:first-child {{ color: #b9770e; }}
img {{ max-width: 100%; }}
</style></head><body>
<h1>Controller journal replay and audit</h1>
{verdict}
<p>{stats.get('events', 0):,} events re-executed from {stats.get('journals', 0)} journal(s) ({stats.get('segments', 0)}
segments, {stats.get('units', 0)} fold units), {_when(series.get('buckets', [None])[0] and series['buckets'][0] - series.get('bucket_ms', 0))}
to {_when((series.get('buckets') or [None])[-1])} UTC.</p>
<h2>Measurements</h2>
<table><tr><th></th><th>count</th><th>median</th><th>p99</th><th>max</th></tr>
<tr><td>offline time per partition</td><td>{off.get('count', 0)}</td><td>{_fmt_ms(off.get('median'))}</td><td>{_fmt_ms(off.get('p99'))}</td><td>{_fmt_ms(off.get('max'))}</td></tr>
<tr><td>time to recover after a broker failure</td><td>{rec.get('count', 0)}</td><td>{_fmt_ms(rec.get('median'))}</td><td>{_fmt_ms(rec.get('p99'))}</td><td>{_fmt_ms(rec.get('max'))}</td></tr>
<tr><td>live processing time per event (journal, step, execute)</td><td>{live.get('count', 0)}</td><td>{_fmt_fine_ms(live.get('median'))}</td><td>{_fmt_fine_ms(live.get('p99'))}</td><td>{_fmt_fine_ms(live.get('max'))}</td></tr>
<tr><td>live queue time per event</td><td>{queue.get('count', 0)}</td><td>{_fmt_fine_ms(queue.get('median'))}</td><td>{_fmt_fine_ms(queue.get('p99'))}</td><td>{_fmt_fine_ms(queue.get('max'))}</td></tr>
</table>
<p>The live times come from the controllers' effects records (journals written since 2026-12-06; older
ones have none, and count 0 here). The processing-time chart draws them beside this replay's own step() +
digest time per event; the events table has both, and the `at` delta between consecutive events of a
journal.</p>
<h2>Findings by rule</h2>{_table("<tr><th>severity</th><th>rule</th><th>count</th></tr>", rows)}
<h2>Findings ({f"first {len(shown)}; " if len(shown) < sum(n for _, _, n in counts) else ""}all are in <code>findings/</code>)</h2>
{_table("<tr><th>severity</th><th>rule</th><th>journal</th><th>file:line</th><th>seq</th><th>partition</th><th>detail</th></tr>", frows)}
<h2>Controller terms</h2>
{_table("<tr><th>epoch</th><th>controller</th><th>journal</th><th>start (UTC)</th><th>end (UTC)</th><th>how it ended</th></tr>", trows)}
<h2>Broker failures</h2>
{_table("<tr><th>broker</th><th>down at (UTC)</th><th>partitions it led</th><th>time to recover</th><th>unrecovered</th></tr>", rrows)}
<h2>Controlled shutdowns</h2>
<p>Brokers that asked the controller to move their leadership away before stopping; not failures.</p>
{_table("<tr><th>broker</th><th>down at (UTC)</th><th>back at (UTC)</th></tr>", srows)}
<h2>Charts</h2>{imgs}
<h2>Tables (Parquet)</h2><ul>{table_list}</ul>
</body></html>
"""
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
