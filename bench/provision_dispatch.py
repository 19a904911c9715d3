"""Benchmark: provision and dispatch N workers on the simulator (real 3 s agent settle), serial versus the default cap.

Run: python3 bench/provision_dispatch.py [--sizes 1,4,8,16] [--caps 1,4] [--json]. Prints wall time and herdr calls
per worker, split into shared reads (no worker's name, pane, branch or path in argv) and per-worker calls, and the CPU
time spent in the window: orch itself, the herdr/git processes it ran, the simulator's long-lived processes (server,
tmux, agents), and the whole machine (other work included). No assertions: the figures go to docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from herdr_sim.testing import SimServer
from orchestrator.dispatch import dispatch
from orchestrator.engine import Engine
from orchestrator.errors import HerdrCall
from orchestrator.herdr import HerdrCli
from orchestrator.preflight import preflight

DEFAULT_CAP = 4  # plan.Defaults.concurrency


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, timeout=60).stdout.strip()


def plan_text(n: int, concurrency: int) -> str:
    workers = "".join(
        f'\n[[workers]]\ntask = "w{i}"\nobjective = "Benchmark worker {i}."\ndeliverable = "Nothing: it stalls."\n'
        f'branch = "feat/bench-{i}"\nclaim = ["src/w{i}/**"]\nverify = ["true"]\n'
        for i in range(n)
    )
    return f'organization = "acme"\nrepo = "widgets"\nbase = "origin/main"\n\n[defaults]\nconcurrency = {concurrency}\n{workers}'


@contextmanager
def short_home() -> Iterator[Path]:
    """A simulator home under /tmp (its unix sockets need a short path), removed once the server has stopped."""
    path = Path(tempfile.mkdtemp(prefix="orch-bench-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def measure(n: int, concurrency: int, root: Path) -> dict[str, Any]:
    """One fresh world: simulator, origin + checkout, controller workspace; then time provision + dispatch."""
    home, src = root / "home", root / "src"
    origin, checkout = root / "origin.git", src / "acme" / "widgets"
    home.mkdir(parents=True)
    git("init", "--quiet", "--bare", "--initial-branch=main", str(origin), cwd=root)
    checkout.parent.mkdir(parents=True)
    git("clone", "--quiet", str(origin), str(checkout), cwd=root)
    (checkout / "README.md").write_text("# widgets\n")
    git("add", "-A", cwd=checkout)
    git("commit", "--quiet", "-m", "initial", cwd=checkout)
    git("push", "--quiet", "-u", "origin", "main", cwd=checkout)
    git("remote", "set-head", "origin", "main", cwd=checkout)
    scenarios = root / "scenarios.toml"
    # Every worker reports working and stays there: dispatch measures acceptance, not the workers' own work.
    scenarios.write_text("".join(f'[[task.w{i}]]\ndo = "stall"\n\n' for i in range(n)))
    plan = root / "plan.toml"
    plan.write_text(plan_text(n, concurrency))
    with short_home() as sim_home, SimServer(sim_home, {"HERDR_SIM_SCENARIOS": str(scenarios)}, session="acme") as sim:
        env = sim.env()
        pane = json.loads(sim.run(["workspace", "create", "--cwd", str(checkout), "--no-focus"]).stdout)["result"]["root_pane"]
        env.update(HOME=str(home), HERDR_ENV="1", HERDR_PANE_ID=pane["pane_id"], HERDR_TAB_ID=pane["tab_id"],
                   HERDR_WORKSPACE_ID=pane["workspace_id"], ORCH_HOME=str(root / "orch-home"), ORCH_SRC_ROOT=str(src),
                   XDG_CONFIG_HOME=str(home / ".config"), XDG_STATE_HOME=str(home / ".local" / "state"))
        engine = Engine.from_env(env)
        engine.controller = "run"
        herdr = engine.herdr
        assert isinstance(herdr, HerdrCli)
        checked = preflight(engine, plan)
        if not checked.ok or checked.run_id is None:
            raise SystemExit(f"preflight failed: {checked.failure}")
        run = engine.find_run(checked.run_id)
        before = len(herdr.calls)
        from orchestrator.provision import provision  # being written alongside this benchmark

        cpu_before = cpu_now(sim.home)
        started = time.monotonic()
        provisioned = provision(engine, run)
        provisioned_at = time.monotonic()
        dispatched = dispatch(engine, engine.find_run(run.run_id))
        ended = time.monotonic()
        cpu_after = cpu_now(sim.home)
        cpu = {k: round(v - cpu_before[k], 2) for k, v in cpu_after.items() if k != "load1"}
        calls = herdr.calls[before:]
        workers = engine.workers(run)
        # engine.close() cannot close connections opened by provisioning threads (sqlite3 thread check); they die with the world.
    return {
        "n": n, "concurrency": concurrency,
        "provision_s": round(provisioned_at - started, 2), "dispatch_s": round(ended - provisioned_at, 2), "wall_s": round(ended - started, 2),
        "cpu_s": cpu, "load1": [cpu_before["load1"], cpu_after["load1"]],
        "ready": sum(w.state == "ready" for w in provisioned.workers),
        "accepted": sum(w.outcome == "accepted" for w in dispatched.workers),
        **split_calls(calls, workers, n),
    }


def cpu_now(sim_home: Path) -> dict[str, float]:
    """Cumulative CPU seconds: orch (this process), the processes it ran and waited for (herdr calls, git), the
    simulator's live processes (server, tmux, agents: everything whose environment names this simulator's home, with
    the children they waited for), the whole machine's busy time, and the 1-minute load average."""
    tick = os.sysconf("SC_CLK_TCK")
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    marker = f"HERDR_SIM_HOME={sim_home}".encode()
    sim = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if marker not in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                continue
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        sim += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    busy = [int(f) for f in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return {
        "orch": me.ru_utime + me.ru_stime, "calls": children.ru_utime + children.ru_stime, "sim": sim / tick,
        "machine": (sum(busy) - busy[3] - busy[4]) / tick, "load1": os.getloadavg()[0],
    }


def split_calls(calls: list[HerdrCall], workers: list[Any], n: int) -> dict[str, Any]:
    """Shared reads mention no worker; per-worker calls name one (its agent, pane, branch or checkout)."""
    marks = [{w.name, w.pane_id or "-", w.branch or "-", w.worktree_path or "-", *w.created_workspace_ids, *w.created_pane_ids} for w in workers]
    shared: Counter[str] = Counter()
    per: Counter[str] = Counter()
    seconds: Counter[str] = Counter()
    for call in calls:
        words = set(call.argv)
        command = " ".join(call.argv[1:3])
        (per if any(words & m for m in marks) else shared)[command] += 1
        seconds[command] += call.seconds
    return {
        "calls": len(calls), "per_worker_calls": round(sum(per.values()) / n, 2), "shared_calls": sum(shared.values()),
        "calls_per_worker": round(len(calls) / n, 2), "per_worker_by_command": dict(per.most_common()), "shared_by_command": dict(shared.most_common()),
        # Summed wall time of each command's processes (overlapping ones add up): where the calls spend their time.
        "call_seconds_by_command": {k: round(v, 2) for k, v in seconds.most_common()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,4,8,16")
    parser.add_argument("--caps", default=f"1,{DEFAULT_CAP}")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    os.environ.pop("HERDR_SIM_SETTLE_MS", None)  # the real 3 s settle
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        for concurrency in (int(c) for c in args.caps.split(",")):
            with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
                row = measure(n, concurrency, Path(tmp))
            rows.append(row)
            print(f"N={n:2d} c={concurrency}: wall {row['wall_s']:6.2f}s (provision {row['provision_s']:.2f}s, dispatch {row['dispatch_s']:.2f}s), "
                  f"{row['calls_per_worker']:.2f} calls/worker ({row['per_worker_calls']:.2f} per-worker + {row['shared_calls']} shared), "
                  f"ready {row['ready']}, accepted {row['accepted']}; cpu {row['cpu_s']}", file=sys.stderr, flush=True)
    machine = {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()}
    if args.json:
        print(json.dumps({"machine": machine, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
