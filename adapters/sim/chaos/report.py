"""What a chaos run shows and saves: the live line, the final tables, `chaos.json`."""
from __future__ import annotations

import json
import re
from pathlib import Path

from rich.console import Console, Group
from rich.table import Table


_ELECTED = re.compile(r"broker \d+ is the controller, epoch (\d+)")
_RESIGNED = re.compile(r"broker \d+ is no longer the controller: (.*)$")


def log_stats(logs) -> dict:
    """Controller changes as the node logs tell them: terms won, the highest epoch, resignations
    by reason, and partition-state writes refused because their controller had been fenced (a
    zombie's late writes)."""
    elected = fenced = 0
    epoch = 0
    resigned: dict[str, int] = {}
    for path in logs:
        try:
            text = Path(path).read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if (m := _ELECTED.search(line)) is not None:
                elected += 1
                epoch = max(epoch, int(m.group(1)))
            elif (m := _RESIGNED.search(line)) is not None:
                reason = m.group(1).split(":")[0].strip()
                resigned[reason] = resigned.get(reason, 0) + 1
            elif "kctl.zkwriter: fenced:" in line:
                fenced += 1
    return {"controller_terms": elected, "last_epoch": epoch, "resignations": dict(sorted(resigned.items())),
            "fenced_writes": fenced}


def status_line(s: dict) -> str:
    """One line about the run so far, from `Run.status()`."""
    controller = "none" if s["controller"] is None else f"{s['controller']} (epoch {s['epoch']})"
    impaired = ",".join(map(str, s["impaired"])) or "-"
    return (f"{s['phase']:<9} {s['elapsed']:5.0f}/{s['duration']:.0f} s  faults {s['faults']:>3}  "
            f"admin {s['admin']:>3}  controller {controller}  impaired {impaired}  "
            f"zookeeper {'restarting' if s['zookeeper_down'] else 'up'}")


def tables(report: dict) -> Group:
    faults = Table(title="faults injected", title_justify="left")
    faults.add_column("kind")
    faults.add_column("injected", justify="right")
    faults.add_column("skipped", justify="right")
    skipped: dict[str, int] = {}
    for reason, n in report["faults_skipped"].items():
        kind = reason.split(":", 1)[0]
        skipped[kind] = skipped.get(kind, 0) + n
    for kind in sorted(set(report["faults"]) | set(skipped)):
        faults.add_row(kind, str(report["faults"].get(kind, 0)), str(skipped.get(kind, 0)))
    faults.add_row("[bold]total[/]", f"[bold]{sum(report['faults'].values())}[/]", str(sum(skipped.values())))

    ops = Table(title="admin operations", title_justify="left")
    for col in ("kind", "ok", "refused", "failed"):
        ops.add_column(col, justify="left" if col == "kind" else "right")
    for kind, outcomes in sorted(report["admin"].items()):
        ops.add_row(kind, *(str(outcomes.get(o, 0)) for o in ("ok", "refused", "failed")))

    checks = Table(title="checks", title_justify="left")
    checks.add_column("check")
    checks.add_column("result")
    checks.add_column("detail")
    for c in report["checks"]:
        result = "[green]PASS[/]" if c["ok"] else "[red]FAIL[/]"
        detail = c["detail"] + "".join(f"\n  {p}" for p in c["problems"][:5])
        checks.add_row(c["name"], result, detail)

    settle = report["settle_seconds"]
    verdict = "[green]PASS[/]" if report["passed"] else f"[red]FAIL[/]: {', '.join(report['failed_checks'])}"
    summary = (f"seed {report['seed']}, {report['duration_s']:.0f} s of chaos on {report['nodes']} nodes, "
               f"{report['partitions_at_end']} partitions at the end ({report['partitions']} at the start)\n"
               f"violations: {report['violations']}   time to settle: "
               f"{'not settled' if settle is None else f'{settle:.1f} s'}   verdict: {verdict}")
    c = report.get("controllers") or {}
    if c:
        summary += (f"\ncontroller terms: {c['controller_terms']} (last epoch {c['last_epoch']}), resignations: "
                    f"{sum(c['resignations'].values())}, late writes fenced: {c['fenced_writes']}")
    r = report.get("replay_stats") or {}
    if r.get("recovery_ms_per_failure"):
        rec, off = r["recovery_ms_per_failure"], r.get("offline_ms_per_partition") or {}
        summary += (f"\nreplay: {r.get('events', 0):,} events; recovery after a broker failure: median "
                    f"{_ms(rec.get('median'))}, p99 {_ms(rec.get('p99'))}, max {_ms(rec.get('max'))} "
                    f"({rec.get('count', 0)} failures); offline time per partition: median "
                    f"{_ms(off.get('median'))}, max {_ms(off.get('max'))}")
        live = r.get("process_ms_per_event") or {}
        if live.get("count"):  # the controllers' own times per event, from their effects records
            summary += (f"; live processing time per event: median {live['median']:,.2f} ms, "
                        f"p99 {live['p99']:,.1f} ms")
    return Group(faults, ops, checks, summary)


def _ms(value) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


def write_json(out: Path, report: dict) -> Path:
    path = out / "chaos.json"
    path.write_text(json.dumps(report, indent=1, default=str))
    return path


def print_report(console: Console, report: dict) -> None:
    console.print(tables(report))
