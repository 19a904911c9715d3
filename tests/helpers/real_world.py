"""The real-agents lane's world: real agent CLIs in the simulator's panes on the scripted model (tests/real_agents)."""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from herdr_sim.detect import app_title, explain
from herdr_sim.model.agents import KINDS, cache_dir, install
from herdr_sim.model.server import ModelServer
from herdr_sim.testing import SimServer
from orchestrator.demo import demo_data
from orchestrator.engine import Engine
from registry import EventKind
from registry.facts import FactKind


ORCH = [sys.executable, "-m", "orchestrator"]
# Read before tests/conftest.py's isolation replaces HOME and the XDG dirs: the cache outlives every test (and session).
CACHE = cache_dir(dict(os.environ))
SETTLE_MS = 3000  # herdr's own readiness delay: no longer one for real agents (issue 20: no help from the world)
# With ORCH_REAL_AGENTS_CAPTURE=DIR every distinct screen of every pane is saved there while the lane runs.
CAPTURE = os.environ.get("ORCH_REAL_AGENTS_CAPTURE")
# The scripted model answers each turn's request after this long, as a real model would after some seconds: an
# instant turn (a silent worker's) is over before herdr's screen detection ever sees the agent working.
THINK_S = 1.0
# The kinds this lane runs: $ORCH_REAL_AGENTS_KINDS (comma list), all four by default (.ci/run names those that pass).
LANE_KINDS = tuple(k for k in os.environ.get("ORCH_REAL_AGENTS_KINDS", ",".join(KINDS)).split(",") if k in KINDS)


def lane_kinds(*kinds: str) -> list[str]:
    """The kinds of ``kinds`` this lane runs, in the order given."""
    return [kind for kind in kinds if kind in LANE_KINDS]
_installed: dict[str, Path] = {}
_problems: dict[str, str] = {}


def agent(kind: str) -> Path:
    """The installed executable of ``kind``, installing the pinned version once a session; skips the test when it cannot."""
    if kind not in _installed and kind not in _problems:
        # One install at a time across processes: `pytest -n 2` (.ci/run) runs this lane in two workers, which would
        # otherwise both run npm into the same prefix; the second then finds the first's install done.
        CACHE.mkdir(parents=True, exist_ok=True)
        with open(CACHE / ".install.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            found, problems = install(CACHE, (kind,), say=lambda line: sys.stderr.write(line + "\n"))
        _installed.update(found)
        for line in problems:
            _problems[kind] = line
    if kind in _problems:
        pytest.skip(f"real agents: {_problems[kind]}")
    return _installed[kind]


# The demo's one-second check-ins are the simulator's pace. A real agent shows one unchanged screen for longer:
# opencode 1.18's busy bar rests on its empty frame (⬝⬝⬝⬝⬝⬝⬝⬝) most of the time, and on a loaded 2-CPU machine it
# takes 30-60 s from a prompt to its first model request, so three check-ins 1 s (or 15 s) apart read identical
# screens and fail it as stalled (spec §5). 30 s apart, a stall takes 90 s of one screen. (The person's default,
# 60 s, passes too, but `orch run` sleeps a whole interval between rounds: the demo took ~3 minutes per kind.)
REAL_CHECKIN_S = 30


# opencode 1.18 draws `Ask anything` 80-95 s after its start on a loaded 2-CPU machine, and later than the ready wait's
# 120 s floor when three start at once beside another lane test: its plans take the longest start wait a plan allows,
# as a person's would on such a machine (orch's own wait, read from the plan: no delay of the lane's).
START_TIMEOUT_S = {"opencode": 300}


def paced(plan: str, kind: str | None = None) -> str:
    """``plan`` (which checks in every second) checking in at a real agent's pace instead, with ``kind``'s start wait."""
    line = f"checkin_interval_s = {REAL_CHECKIN_S}"
    if kind in START_TIMEOUT_S:
        line += f"\nagent_start_timeout_s = {START_TIMEOUT_S[kind]}"
    text = re.sub(r"^checkin_interval_s = 1\b", line, plan, count=1, flags=re.MULTILINE)
    assert text != plan, "the plan no longer sets checkin_interval_s = 1"
    return text


def demo_plan(kind: str) -> str:
    """The `orch demo` plan with every worker of one kind, checking in at a real agent's pace."""
    text = demo_data("plan.toml")
    for other in KINDS:
        text = text.replace(f'kind = "{other}"', f'kind = "{kind}"')
    return paced(text, kind)


@dataclass
class RealWorld:
    """A simulated herdr whose panes run the real agents, the scripted model they talk to, the demo repository."""

    kind: str
    root: Path
    sim: SimServer
    model: ModelServer
    repo: Path
    env: dict[str, str]
    launchers: Path
    titles: set[str] = field(default_factory=set)  # every pane title seen while the world ran (its Recorder's)

    def orch(self, *args: str, timeout: float = 420) -> subprocess.CompletedProcess[str]:
        """`orch ARGS` as the controller pane runs it."""
        return subprocess.run([*ORCH, *args], env=self.env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def write_plan(self, text: str) -> Path:
        path = self.root / "plan.toml"
        path.write_text(text)
        return path

    def engine(self) -> Engine:
        """An engine on this world's ledger, wired like the CLI's (close it after use)."""
        return Engine.from_env(self.env)

    def run_dir(self, run_id: str) -> Path:
        return Path(self.env["ORCH_HOME"]) / "runs" / run_id.replace(":", "_")

    def diagnose(self, done: subprocess.CompletedProcess[str]) -> str:
        """What to read when a run went wrong: orch's progress, every pane's screen and title, the model's log."""
        tmux = ["tmux", "-S", str(self.sim.paths.tmux_socket), "-f", "/dev/null"]
        listed = subprocess.run([*tmux, "list-panes", "-a", "-F", "#{pane_id}\t#{pane_title}"], capture_output=True, text=True, timeout=10)
        try:
            outcome = json.loads(done.stdout)
            said = f"stopped at: {outcome.get('stopped_at')}; blockers: {outcome.get('report', {}).get('blockers')}"
        except (json.JSONDecodeError, AttributeError):
            said = f"stdout (tail): {done.stdout[-1500:]}"
        parts = [f"orch exited {done.returncode}; {said}", "stderr (tail):", done.stderr[-3000:]]
        for line in listed.stdout.splitlines():
            pane, _, title = line.partition("\t")
            screen = subprocess.run([*tmux, "capture-pane", "-p", "-t", pane], capture_output=True, text=True, timeout=10).stdout
            parts += [f"--- pane {pane} title={title!r}", "\n".join(row for row in screen.splitlines() if row.strip())[-2000:]]
        parts.append("--- model requests: " + ", ".join(
            f"{e['n']}:{e.get('task') or '-'}:{'+'.join(c['name'] for c in e.get('reply', {}).get('calls', [])) or 'text'}"
            for e in self.model.requests() if e.get("method") == "POST"))
        return "\n".join(parts)

    def agent_exits(self, run_id: str) -> dict[str, list[str]]:
        """How each worker's agent left its pane, from the ledger: `exited by CMD` where orch typed the kind's exit
        command and saw the shell come back (a finished worker's slot freed early: the AGENT_EXITED fact; the stop
        ladder's `exited` item at retire), else what the ladder did instead (`kept: why`, `stopped`, `untouched: why`)."""
        engine = self.engine()
        try:
            events = engine.ledger.events(run_id)
            typed = {(e.task_label, e.request.get("pane")): e.request.get("text") for e in engine.ledger.list_effects(run_id)
                     if e.kind == "pane_send_text" and e.key.endswith(":exit_text")}  # fmt: skip
        finally:
            engine.close()
        exits: dict[str, list[str]] = {}
        for event in events:
            if event.task_label is None:
                continue
            if event.kind == FactKind.AGENT_EXITED:
                exits.setdefault(event.task_label, []).append(f"exited by {event.detail['how']}")
            elif event.kind == EventKind.TRANSITION and event.detail.get("cause", {}).get("phase") == "retire":
                for item in event.detail["cause"].get("items", []):
                    if item["kind"] != "agent":
                        continue
                    said = f"exited by {typed.get((event.task_label, item['id']))}" if item["action"] == "exited" else item["action"]
                    exits.setdefault(event.task_label, []).append(said + (f": {item['reason']}" if item.get("reason") else ""))
        return exits

    def agent_processes(self) -> list[int]:
        """Live processes whose HOME is one of this world's agent homes (the real agents and anything they started)."""
        needle = f"HOME={self.launchers / 'homes'}/".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                environ = (entry / "environ").read_bytes()
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if any(item.startswith(needle) for item in environ.split(b"\0")) and stat[stat.rindex(")") + 2] != "Z":
                found.append(int(entry.name))
        return found


    def pane_processes(self, kind: str) -> list[int]:
        """Live processes named like the agent of ``kind`` started in this world's panes (whatever their HOME)."""
        needle = str(self.sim.paths.home).encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                environ = (entry / "environ").read_bytes()
                stat = (entry / "stat").read_text()
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            named = any(Path(arg.decode(errors="replace")).name == kind for arg in argv[:2])
            if named and needle in environ and stat[stat.rindex(")") + 2] != "Z":
                found.append(int(entry.name))
        return found


def stable_report(world: RealWorld, run_id: str) -> str:
    """`orch report` with its run id, temp paths, herdr ids and SHAs made stable (w1:pN, wN, <sha>, <base>)."""
    text = world.orch("report", "--run", run_id).stdout
    text = text.replace(str(world.run_dir(run_id)), "<home>/runs/<run>").replace(run_id, "<run>").replace(str(world.root), "<root>")
    text = re.sub(r"pane w1:p[2-9]\d*", "pane w1:pN", re.sub(r"workspace w[2-9]\d*", "workspace wN", text))
    return re.sub(r"\b[0-9a-f]{12}\b", "<base>", re.sub(r"\b[0-9a-f]{7}\b", "<sha>", text))


class Recorder(threading.Thread):
    """Watches every pane of a world twice a second: the pane titles it shows go into ``world.titles`` (a title sign of
    the quirk table is proven on them: claude draws its busy spinner only in its title), and with ``out`` every
    distinct screen is saved there (with its title, time, and the simulator's reading of it) as `<kind>-N.txt` and
    `<kind>-index.txt`, the layout of ../shared/real-agents/screens, for refreshing the captures the quirk table cites
    (docs/real-agents.md)."""

    def __init__(self, world: RealWorld, out: Path | None, interval_s: float = 0.5) -> None:
        super().__init__(name="screen-recorder", daemon=True)
        self.world, self.out, self.interval_s = world, out, interval_s
        self.stopped = threading.Event()
        self.count = 0

    def run(self) -> None:
        if self.out is not None:
            self.out.mkdir(parents=True, exist_ok=True)
        tmux = ["tmux", "-S", str(self.world.sim.paths.tmux_socket), "-f", "/dev/null"]
        start, last = time.monotonic(), {}
        while not self.stopped.wait(self.interval_s):
            try:
                listed = subprocess.run([*tmux, "list-panes", "-a", "-F", "#{pane_id}\t#{pane_title}"], capture_output=True, text=True, timeout=10)
                for line in listed.stdout.splitlines():
                    pane, _, title = line.partition("\t")
                    self.world.titles.add(title)
                    if self.out is None:
                        continue
                    screen = subprocess.run([*tmux, "capture-pane", "-p", "-t", pane], capture_output=True, text=True, timeout=10).stdout
                    rows = [row for row in screen.splitlines() if row.strip()]
                    if len(rows) <= 1 or last.get(pane) == (screen, title):
                        continue  # a bare shell prompt, or nothing new
                    last[pane] = (screen, title)
                    self.save(pane, screen, title, time.monotonic() - start)
            except (OSError, subprocess.SubprocessError):
                continue  # the world is being torn down

    def save(self, pane: str, screen: str, title: str, at: float) -> None:
        assert self.out is not None
        kind = self.world.kind
        self.count += 1
        name = f"{kind}-{self.count}"
        (self.out / f"{name}.txt").write_text(screen)
        read = explain(kind, screen, app_title(title))
        rule = read.rule.id if read.rule is not None else "fallback"
        with (self.out / f"{kind}-index.txt").open("a") as index:
            index.write(f"{name} +{at:.1f}s title=[{title}] pane={pane} sim={read.state} rule={rule}\n")

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=10)
