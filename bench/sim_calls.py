"""Measures the wall time of single herdr-sim calls (each a fresh Python process) against a live simulated server.

Run: python3 bench/sim_calls.py [--runs N] [--module]. Prints one line per call kind: median wall time and mean CPU
time (user+sys of the child, less sensitive to a busy machine) in milliseconds. By default each call goes through the
`herdr` executable the server writes (what orch runs); --module runs `python -m herdr_sim.cli` instead (what
SimServer.run does). Compare another checkout's code with PYTHONPATH=<its root> python3 bench/sim_calls.py.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from herdr_sim.testing import SimServer

CALLS = {
    "--version": ["--version"],
    "--help": ["--help"],
    "usage error": ["workspace", "list", "--json"],
    "status --json": ["status", "--json"],
    "workspace list": ["workspace", "list"],
    "pane get": ["pane", "get", "w1:p1"],
    "agent list": ["agent", "list"],
    "pane send-text": ["pane", "send-text", "w1:p1", ""],
}


def main() -> int:
    """Start a private simulator, create a few panes, time each call kind."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--module", action="store_true", help="python -m herdr_sim.cli instead of the herdr executable")
    args = parser.parse_args()
    runs = args.runs
    with tempfile.TemporaryDirectory(prefix="sim-bench-") as tmp, SimServer(Path(tmp) / "sim") as sim:
        for _ in range(2):
            sim.run(["workspace", "create", "--cwd", tmp])
        sim.run(["pane", "split", "w1:p1", "--direction", "right"])
        env = sim.env()
        command = [sys.executable, "-m", "herdr_sim.cli"] if args.module else [str(sim.paths.bin / "herdr")]
        subprocess.run([*command, "--version"], capture_output=True, env=env, timeout=30)  # warm any bytecode cache
        for name, argv in CALLS.items():
            times, cpu = [], []
            for _ in range(runs):
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                began = time.perf_counter()
                subprocess.run([*command, *argv], capture_output=True, env=env, timeout=30)
                times.append((time.perf_counter() - began) * 1000)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
            print(f"{name:<16} wall median {statistics.median(times):6.0f} ms   cpu mean {statistics.mean(cpu):6.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
