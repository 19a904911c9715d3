"""Measures cold start of `orch --version`, `orch status` and `orch inbox add` as ratios to `python3 -c 'import click'`.

Run: python3 bench/cold_start.py [--runs N] [--json]. Each sample is a fresh process, run in rotation with the
baseline (same interpreter, same moment), so a busy machine moves both alike; the ratio is median/median of wall
time (the target), with the children's CPU time (user+sys) beside it. The
state is a private ORCH_HOME with one dispatched worker; each `inbox add` is a distinct valid `update` callback
(accepted and recorded, as a worker's callback is). Bytecode is written by a warm-up call of each command, as a
normal install does (this environment may set PYTHONDONTWRITEBYTECODE; the children run without it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fixtures import RUN, orch_executable, seed_dispatched_worker

TARGETS = {"--version": 1.5, "status": None, "inbox add": 3.0}


def _callback(n: int) -> str:
    return f"[herdr-orchestration run={RUN} task=feature-a from=feature-a kind=update reply-to=w1:pa]\nstep {n} done"


def _time(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child): CPU moves less than wall when other work shares the machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"bench: {argv[1:]} exited {done.returncode}: {done.stderr.strip()}")
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    """Seed a ledger, then time each command and the baseline in rotation; print medians and ratios."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    orch = orch_executable()
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
        home = Path(tmp) / "orch-home"
        seed_dispatched_worker(home)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(ORCH_HOME=str(home), HERDR_PANE_ID="w1:p1")
        commands = {
            "--version": lambda n: [orch, "--version"],
            "status": lambda n: [orch, "status", "--run", RUN],
            "inbox add": lambda n: [orch, "inbox", "add", "--run", RUN, _callback(n)],
        }
        baseline = [sys.executable, "-c", "import click"]
        for argv in commands.values():  # warm-up: bytecode, page cache
            _time(argv(-1), env)
        _time(baseline, env)
        samples: dict[str, list[tuple[float, float]]] = {"import click": [], **{name: [] for name in commands}}
        for n in range(args.runs):
            samples["import click"].append(_time(baseline, env))
            for name, argv in commands.items():
                samples[name].append(_time(argv(n), env))
    base = statistics.median(wall for wall, _ in samples["import click"])
    base_cpu = statistics.median(cpu for _, cpu in samples["import click"])
    rows = []
    for name, times in samples.items():
        median = statistics.median(wall for wall, _ in times)
        cpu = statistics.median(cpu for _, cpu in times)
        target = TARGETS.get(name)
        rows.append({"command": name, "median_ms": round(median * 1000, 1), "ratio": round(median / base, 2),
                     "cpu_ms": round(cpu * 1000, 1), "cpu_ratio": round(cpu / base_cpu, 2), "target": target,
                     "ok": None if target is None else median / base <= target})  # fmt: skip
    if args.json:
        print(json.dumps({"runs": args.runs, "python": sys.version.split()[0], "rows": rows}, indent=2))
    else:
        print(f"median of {args.runs} runs each, python {sys.version.split()[0]}")
        for row in rows:
            label = "orch " + row["command"] if row["command"] != "import click" else "python3 -c 'import click'"
            verdict = "" if row["target"] is None else f"  target <= {row['target']}x: {'ok' if row['ok'] else 'MISSED'}"
            print(f"{label:<28} {row['median_ms']:>7.1f} ms {row['ratio']:>5.2f}x   cpu {row['cpu_ms']:>6.1f} ms {row['cpu_ratio']:>5.2f}x{verdict}")
    return 0 if all(row["ok"] is not False for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
