"""Fair dispatch, simulated: one global FIFO vs Onward's real claim (onward.store.claims), side by side.

    .venv/bin/python -m bench.fairness [--json] [--jobs N] [--seed S] [--serial] [--processes P]

Runs the comparison of bench/fairness/report.py (the scenarios of scenarios.py, each simulated by
simulator.py) and prints its table, or the whole report as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys

from bench.fairness.report import PROCESSES, render_table, run
from bench.fairness.scenarios import BULK_JOBS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fairness", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--jobs", type=int, default=BULK_JOBS, help="bulk's backlog (default 2,000,000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--serial", action="store_true", help="one process instead of two")
    parser.add_argument("--processes", type=int, default=PROCESSES,
                        help=f"Onward's worker processes sharing the 100 workers (default {PROCESSES})")
    args = parser.parse_args(argv)
    report = run(args.jobs, args.seed, serial=args.serial, processes=args.processes)
    print(json.dumps(report, indent=2) if args.json else render_table(report))
    checked = [target["met"] for target in report["targets"].values() if target.get("checked", True)]
    return 0 if all(checked) else 1


if __name__ == "__main__":
    sys.exit(main())
