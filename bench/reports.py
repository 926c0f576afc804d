#!/usr/bin/env python3
"""The README's report and comparison, from real runs: two `--repeat 5` runs of the same cases,
compared by `msgperf compare` (its Markdown table goes to docs/results/reports.md), and the
first run's HTML report, whose plots are saved beside it as SVG (docs/results/*.svg).

    python3 bench/reports.py [--no-write]
"""
import os, re, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import build_msgperf, recorded, root, sh

CASES = ["run", "pingpong", "-t", "uds,tcp,shm", "-s", "64,4k", "--placement", "same-cpu",
         "--duration", "300ms", "--repeat", "5"]


def main():
    msgperf = build_msgperf("")
    with tempfile.TemporaryDirectory() as d:
        runs = []
        for name in ["base", "new"]:
            path = os.path.join(d, f"{name}.json")
            sh([msgperf, *CASES, "--json", path])
            runs.append(path)
        md = os.path.join(d, "compare.md")
        table = sh([msgperf, "compare", *runs, "--export", f"md={md}"],
                   env={**os.environ, "COLUMNS": "100"})
        print(f"`msgperf {' '.join(CASES)}`, twice, then `msgperf compare BASE NEW`:\n")
        print(open(md).read())
        print(f"\nThe same at 100 columns:\n\n```text\n{table}```")
        html = os.path.join(d, "report.html")
        sh([msgperf, "report", runs[0], "-o", html])
        svgs = re.findall(r"<svg.*?</svg>", open(html).read(), re.S)
        if "--no-write" not in sys.argv:
            for i, name in [(0, "spectrum"), (1, "latency-by-size")]:
                with open(os.path.join(root, "docs", "results", f"report-{name}.svg"), "w") as f:
                    f.write(svgs[i])
        print(f"\nplots of the first run: docs/results/report-spectrum.svg, "
              f"docs/results/report-latency-by-size.svg ({len(svgs)} in its HTML report)")
    return 0


if __name__ == "__main__":
    sys.exit(recorded("reports", main))
