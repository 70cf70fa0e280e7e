"""The replay report as a user sees it: rendered by headless Chromium, then read back from the
page (text as laid out, images as loaded) and from the chart pixels.

Needs a `chromium` binary (Debian: `apt-get install chromium`); skipped, saying so, without one.
"""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from replay import history, report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (apt-get install chromium)")

# collects, once the page and its images have loaded, each section's visible text (innerText
# follows the layout: hidden things are not in it) and each image's loaded size
PROBE = """<script>
window.addEventListener('load', () => {
  const out = {sections: {}, images: []};
  document.querySelectorAll('h2').forEach(h => {
    let text = '', n = h.nextElementSibling;
    while (n && n.tagName !== 'H2') { text += n.innerText + '\\n'; n = n.nextElementSibling; }
    out.sections[h.innerText] = text;
  });
  document.querySelectorAll('img').forEach(i => out.images.push(
    [i.getAttribute('src'), i.naturalWidth, i.naturalHeight, Math.round(i.getBoundingClientRect().width)]));
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def render(report_dir: Path) -> dict:
    """Open report.html in headless Chromium; return what the probe saw."""
    page = report_dir / "probe.html"
    page.write_text((report_dir / "report.html").read_text().replace("</body>", PROBE + "</body>"))
    proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={report_dir / '.chromium'}", "--allow-file-access-from-files",
                           "--virtual-time-budget=10000", "--window-size=1280,4000", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert m, proc.stdout[-2000:]
    return json.loads(html.unescape(m.group(1)))


def write(out: Path, result, **overrides) -> Path:
    args = dict(stats=result.stats, counts=history.by_rule(result.findings), sample=result.findings,
                series=result.series, terms=result.tables["controller_terms"],
                failures=result.tables["broker_failures"], passed=result.passed,
                shutdowns=[iv for iv in result.tables["broker_intervals"] if iv["reason"] == "controlled shutdown"])
    args.update(overrides)
    report.write_report(out, **args)
    return out


@needs_chromium
def test_the_report_reads_right_in_a_browser(replayed, tmp_path):
    intervals = replayed.tables["broker_intervals"]
    shutdowns = [iv for iv in intervals if iv["reason"] == "controlled shutdown"]
    crashes = [iv for iv in intervals if iv["reason"] == "deregistered"]
    assert shutdowns and crashes, "the generated life should hold both controlled shutdowns and failures"
    seen = render(write(tmp_path / "r", replayed))
    sections = seen["sections"]
    failures = sections["Broker failures"]
    # one row per failure, none per controlled shutdown
    assert len([ln for ln in failures.splitlines() if re.match(r"^\d+\t", ln)]) == len(crashes)
    assert len(replayed.tables["broker_failures"]) == len(crashes)
    shut = sections["Controlled shutdowns"]
    assert len([ln for ln in shut.splitlines() if re.match(r"^\d+\t", ln)]) == len(shutdowns)
    terms = sections["Controller terms"]
    assert "still the controller when the journal ends" not in terms
    assert terms.count("the latest term") <= 1
    assert "took over with epoch" in terms or "Resigned" in terms or "Fenced" in terms
    assert [(src, w > 0 and h > 0 and shown > 0) for src, w, h, shown in seen["images"]] == \
        [(name, True) for name in ("offline_partitions.png", "leaders_per_broker.png", "event_rate.png",
                                   "processing_time.png")]


@needs_chromium
def test_empty_tables_read_none(replayed, tmp_path):
    seen = render(write(tmp_path / "r", replayed, counts=[], sample=[], failures=[], terms=[], shutdowns=[],
                        passed=True))
    for name in ("Findings by rule", "Controller terms", "Broker failures", "Controlled shutdowns"):
        assert seen["sections"][name].strip().splitlines()[-1] == "none", (name, seen["sections"][name])
    findings = next(v for k, v in seen["sections"].items() if k.startswith("Findings ("))
    assert findings.strip() == "none"


def _pixels(png: Path):
    import numpy as np
    from PIL import Image

    return np.asarray(Image.open(png).convert("RGB")).astype(int)  # rows, columns, RGB


def _colour_pixels(png: Path, colour: str, alpha: float = 1.0) -> int:
    """How many pixels have `colour` drawn with `alpha` over white."""
    from matplotlib.colors import to_rgb

    target = [round(255 * (alpha * c + (1 - alpha))) for c in to_rgb(colour)]
    return int((abs(_pixels(png) - target) <= 12).all(axis=2).sum())


def _blue_columns(png: Path) -> list[int]:
    """Pixel columns holding a blue pixel (the p50 line, C0, antialiased; the grid is grey)."""
    px = _pixels(png)
    return [int(x) for x in ((px[:, :, 2] - px[:, :, 0]) > 60).any(axis=0).nonzero()[0]]


def test_brokers_leading_equally_stay_visible_and_timings_draw_one_line(tmp_path):
    """Three brokers leading the same number of partitions all show in the chart (lines drawn
    over each other showed only the last), and a processing-time series with idle buckets draws
    as one line over the measured span (NaN gaps split it into fragments)."""
    n = history.BUCKETS
    buckets = [1000 * (k + 1) for k in range(n)]
    same = [10] * n
    p50 = [None if k % 3 else 50.0 + k for k in range(n)]
    series = {"buckets": buckets, "bucket_ms": 1000, "offline": [0] * n, "events": [1] * n,
              "leaders": {1: same, 2: same, 3: same}, "replay_us_p50": p50, "replay_us_p99": [None] * n}
    report.write_report(tmp_path, stats={}, counts=[], sample=[], series=series, terms=[], failures=[],
                        passed=True)
    for colour in ("C0", "C1", "C2"):
        assert _colour_pixels(tmp_path / "leaders_per_broker.png", colour, 0.85) > 2000, colour
    columns = sorted(_blue_columns(tmp_path / "processing_time.png"))
    span = range(columns[0], columns[-1] + 1)
    assert len(columns) / len(span) > 0.9, "the p50 line is broken into fragments"
