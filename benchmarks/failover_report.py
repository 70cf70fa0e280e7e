"""Markdown tables and charts from a failover benchmark's result file:

    python -m benchmarks.failover_report OUT/result.json [--charts DIR]

`--charts` draws the phase chart of each size, the scaling chart of a run over several sizes,
and (for results recorded since 2026-11-28) the median `batched` run of each scenario in time
(`timeline-<size>.png`: the writes, the controller's events, each broker's acknowledgements).

Also reads `result.partial.json`, which `kctl bench failover` rewrites after each mode, so a long
scaling run stopped midway still gives its tables and charts (for the sizes and scenarios that
finished).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks import client_visible
from benchmarks.failover import CLUSTER_MODES, MODES, chart, scaling_chart, timeline_chart

RATIOS = ("kafka24_over_batched", "batched_over_java_floor", "batched_over_floor", "zk_floor_over_java_floor",
          "sequential_over_batched")


def _ms(value) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _client(results: dict, mode: str, s: dict) -> str:
    if "client_visible_median_ms" in s:
        return (f"{_ms(s['client_visible_median_ms'])} ({_ms(s['client_visible_min_ms'])}-"
                f"{_ms(s['client_visible_max_ms'])})")
    if mode in client_visible.MODES and "client-visible" in results.get("absent", {}):
        return "absent"
    return "-"


def markdown(results: dict) -> str:
    lines = []
    for size in results["sizes"]:
        by_size = results["by_partitions"].get(str(size))
        if not by_size or not any(by_size["scenarios"].values()):
            continue
        lines += [f"**{size:,} partitions**, median of {results['runs']} runs, ms (min-max); "
                  "`unprepared`: the one run without gc.collect() and the sleep", "",
                  "| scenario | mode | median | min-max | unprepared | client-visible** | ZooKeeper phase* | "
                  "CPU ctrl / zk / brokers | peak RSS MB |", "|---|---|---|---|---|---|---|---|---|"]
        for scenario, modes in by_size["scenarios"].items():
            for mode in MODES:
                s = modes.get(mode)
                if s is None:
                    continue
                cpu = s.get("cpu") or {}
                phase = s["phases_ms"]["watch_delivery" if scenario == "controller-failover" and mode in CLUSTER_MODES
                                       else "zk_writes"]
                lines.append(f"| {scenario} | {mode} | {_ms(s['median_ms'])} | {_ms(s['min_ms'])}-{_ms(s['max_ms'])} | "
                             f"{_ms(s.get('unprepared_ms'))} | {_client(results, mode, s)} | {_ms(phase)} | "
                             f"{_ms(cpu.get('controller_process_ms'))} / {_ms(cpu.get('zookeeper_ms'))} / "
                             f"{_ms(cpu.get('brokers_ms'))} | {_ms(s.get('peak_rss_mb'))} |")
        lines += ["", "*the phase holding the ZooKeeper work: `zk_writes`; for the cluster modes in "
                  "controller-failover, `watch_delivery`, which holds the load of every state (and the election)",
                  "", "**when a stock client (librdkafka) polling a surviving broker's metadata first saw every new "
                  "leader (controller-failover: the new controller id), from t0: median (min-max); measured in the "
                  "batched and kafka-2.4 runs" + (f"; absent here: {results['absent']['client-visible']}"
                                                 if "client-visible" in results.get("absent", {}) else ""),
                  "", "| scenario | " + " | ".join(RATIOS) + " |", "|---" * (len(RATIOS) + 1) + "|"]
        for scenario, r in (by_size.get("ratios") or {}).items():
            lines.append(f"| {scenario} | " + " | ".join(f"{r[k]:.2f}x" if k in r else "-" for k in RATIOS) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("result")
    parser.add_argument("--charts", help="draw the charts into this directory")
    args = parser.parse_args(argv)
    results = json.loads(Path(args.result).read_text())
    print(markdown(results))
    if args.charts:
        out = Path(args.charts)
        out.mkdir(parents=True, exist_ok=True)
        done = [s for s in results["sizes"] if any(results["by_partitions"].get(str(s), {}).get("scenarios", {}).values())]
        for size in done:
            chart(results, out / f"failover-{size}.png", size)
            timeline_chart(results, out / f"timeline-{size}.png", size)  # (results of before 2026-11-28 have none)
        if len(done) > 1:
            scaling_chart({**results, "sizes": done}, out / "scaling.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
