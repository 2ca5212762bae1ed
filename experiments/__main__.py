"""`python -m experiments run fig2a|fig2b|fig2c|fig2d|fig2e [...]`: Grid-style scenarios."""

from __future__ import annotations

import argparse
from pathlib import Path

from experiments.scenarios import SCENARIOS, run_scenario


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments",
                                     description="Reproduce the paper's Fig. 2 on local processes or a host list.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one scenario and write JSON-lines logs",
                         description="Run a Fig. 2 scenario: for each x value, each run and each algorithm, start "
                                     "an overlay, subscribe, publish, wait for the notifications, write logs.")
    run.add_argument("scenario", choices=sorted(SCENARIOS))
    run.add_argument("--runs", type=int, default=1, help="runs per point [1]")
    run.add_argument("--discard", type=int, default=0,
                     help="warm-up runs the aggregation discards (recorded here for the hint printed at the end) [0]")
    run.add_argument("--out", type=Path, default=Path("runs"), help="log directory [runs]")
    run.add_argument("--hosts", type=Path, help="file of host names, one peer per host over SSH (default: local processes)")
    run.add_argument("--scale", choices=("local", "paper"), default="local",
                     help="sizes for one machine, or the paper's (for a cluster) [local]")
    run.add_argument("--algorithms", default="osma,csma", help="comma-separated [osma,csma]")
    run.add_argument("--concurrency", type=int, default=8, help="publications in flight [8]")
    run.add_argument("--timeout", type=float, default=600, help="seconds per run before giving up [600]")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--x", type=int, action="append", help="run only these x values (repeatable)")
    args = parser.parse_args(argv)
    if args.discard >= args.runs and args.runs > 1:
        parser.error("--discard must be smaller than --runs")
    return run_scenario(args.scenario, runs=args.runs, out=args.out, hosts_file=args.hosts,
                        algorithms=args.algorithms.split(","), scale=args.scale, concurrency=args.concurrency,
                        timeout=args.timeout, seed=args.seed, only=args.x)


if __name__ == "__main__":
    raise SystemExit(main())
