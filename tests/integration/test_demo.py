"""`kctl demo` run as a user runs it (`make demo`): a subprocess, its output as printed, the temp
directory afterwards. What it shows at the end must be true: the final table has every broker
back in its ISRs, no line is cut mid-word, and no path is printed that is gone once it exits."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark  # the demo ends with the Spark audit


def run_demo(tmp_path: Path, *flags: str) -> tuple[subprocess.CompletedProcess, Path]:
    temp = tmp_path / "temp"
    temp.mkdir()
    done = subprocess.run([sys.executable, "-m", "adapters.cli", "demo", *flags], capture_output=True, text=True,
                          timeout=1200, env={**os.environ, "TMPDIR": str(temp), "COLUMNS": "140",
                                             "PYTHONIOENCODING": "utf-8"})
    return done, temp


def final_table(out: str) -> dict[str, list[int]]:
    """{partition: isr} from the last table the demo printed (the `done` view)."""
    last = out[out.rindex("│ done"):]
    rows = {}
    for line in last.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if len(cells) == 4 and re.fullmatch(r"(orders|events)-\d+", cells[0]):
            rows[cells[0]] = [int(b) for b in cells[3].split(",") if b]
    return rows


def check_common(done: subprocess.CompletedProcess, temp: Path) -> str:
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert "audit verdict: PASS" in out
    isr = final_table(out)
    assert len(isr) == 9, out[-3000:]
    # orders: RF 3; events-0 was reassigned to three brokers; events-1 and -2: RF 2
    expected = {tp: 3 if tp.startswith("orders") or tp == "events-0" else 2 for tp in isr}
    assert {tp: len(members) for tp, members in isr.items()} == expected, isr
    election = re.search(r"kctl leader-election PREFERRED: (.*)", out).group(1).strip()
    assert re.fullmatch(r"\d+ leader\(s\) moved back to the preferred replica, \d+ already there", election), election
    assert sorted(p.name for p in temp.iterdir() if p.name.startswith("kctl-")) == []
    return out


@pytest.mark.timeout(1500)
def test_the_demo_ends_in_sync_names_no_vanished_path_and_leaves_nothing(tmp_path):
    done, temp = run_demo(tmp_path)
    out = check_common(done, temp)
    assert str(temp) not in out  # the run's directory is deleted on exit: no path into it is shown
    assert "--keep" in out


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_with_keep_the_report_it_names_is_there(tmp_path):
    done, temp = run_demo(tmp_path, "--keep")
    kept = sorted(temp.glob("kctl-demo-*"))
    try:
        assert len(kept) == 1
        report = Path(re.search(r"\(report: (\S+)\)", done.stdout).group(1))
        assert report.is_file() and report.name == "report.html" and report.is_relative_to(kept[0])
    finally:
        for path in kept:
            subprocess.run(["rm", "-rf", str(path)], check=False)
