"""The crash matrix: stop `orch run` at every herdr call of a clean run, `orch resume` until it reports, check it converged.

Not part of `python3 -m pytest` (it takes minutes); `.ci/run` runs it as its own lane:
`python3 tests/crash/matrix.py [--jobs N] [--every N --offset K] [--only CASE ...]`. `--unknown` is the unknown-outcome matrix:
orch stays alive and the herdr call itself is killed, just before or just after each mutating call of the clean run
(`lose-before-N`, `lose-after-N`); each case must reach the clean verdict in its one `orch run`, with no resume. The demo's 3-worker plan runs on a private
simulator with a short settle. Every `orch run` and `orch resume` is a fresh `python -m orchestrator` process, stopped by
a real signal. The simulator logs every argv orch passed to herdr and every answer (HERDR_SIM_CALL_LOG, written
by herdr itself, so even a call whose caller died before reading the answer is in it); the herdr
boundary's test seam (`orchestrator.crash_seam.CrashSeam`) signals orch just before or just after its call N.
"""

from __future__ import annotations

import argparse
import collections
import compileall
import json
import os
import re
import shlex
import signal
import string
import sqlite3
import subprocess
import sys
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator import demo
from orchestrator.demo import Stage, build_project, demo_data
from herdr_sim.testing import SimServer
import contextlib

ORCH = [sys.executable, "-m", "orchestrator"]
PROJECT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
# The plan every case runs: the demo's 3 workers, or (`--plan wide`) wide_plan.toml's 5 (concurrency 2, `after`,
# two sibling pairs) with wide_scenarios.toml's scripted agents for the two the demo lacks, or (`--plan remote`) the
# two-host demo's (`orch demo --hosts`: usage-docs on a simulated build box, orchestrator.demo.Stage with hosts).
PLAN = "demo"
BOX = demo.BOX
# The box's orch, as the plan names it: the clone's own, behind a wrapper that logs what `inbox add --spool` answered
# (each spooled entry's id), so the matrix can check each one was recorded exactly once.
BOX_ORCH = """\
#!/bin/sh
if [ "$1 $2" = "inbox add" ]; then
    out=$("{orch}" "$@"); code=$?
    printf '%s\\n' "$out"
    printf '%s\\n' "$out" >>"{log}"
    exit $code
fi
exec "{orch}" "$@"
"""
SETTLE_MS = "100"  # herdr's own agent settle is 3 s; the matrix needs hundreds of runs
INTERVAL = "0.3"  # seconds between check-ins
RESUMES = 6  # a converging run reports after one resume; a few more show a stall is not just slowness
# Calls that change nothing in herdr: SIGTERM/SIGINT cases use only the others ("every mutating call").
READS = {("version",), ("--version",), ("--help",), ("status",), ("session", "list"), ("integration", "status"), ("api", "schema"),
         ("workspace", "list"), ("workspace", "get"), ("tab", "list"), ("tab", "get"), ("pane", "list"), ("pane", "get"),
         ("pane", "current"), ("pane", "layout"), ("pane", "read"), ("worktree", "list"), ("agent", "list"), ("agent", "get"),
         ("agent", "read"), ("agent", "wait"), ("agent", "explain")}
# What must never happen twice for a worker: the creates and the prompts.
COUNTED = {("worktree", "create"), ("pane", "split"), ("pane", "move"), ("agent", "start"), ("agent", "prompt")}


@dataclass(frozen=True)
class Case:
    """One crash: where `orch run` is stopped, and (optionally) where the first `orch resume` is stopped again."""

    name: str
    run_crash: str | None = None  # ORCH_TEST_CRASH_AT for `orch run`
    resume_crash: str | None = None  # ORCH_TEST_CRASH_AT for the first `orch resume`


@dataclass
class Outcome:
    """What one case ended with, and what was wrong with it (empty: converged)."""

    case: Case
    problems: list[str] = field(default_factory=list)
    duplicates: int = 0
    calls: list[dict[str, Any]] = field(default_factory=list)  # as herdr logged them (made, with their answers)
    started: list[dict[str, Any]] = field(default_factory=list)  # as orch numbered them (the seam's N)
    resume_calls: int = 0
    facts: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


class MatrixStage(Stage):
    """The demo's stage with a short agent settle."""

    def overrides(self) -> dict[str, str]:
        # The call zygote (herdr_sim.forks): the same calls and answers at a quarter of the CPU of a cold start each;
        # its C client is built once for the whole matrix, in the folder every case's stage lives in.
        return {**super().overrides(), "HERDR_SIM_SETTLE_MS": SETTLE_MS, "HERDR_SIM_FORKSERVER": "1",
                "HERDR_SIM_CLIENT_CACHE": str(self.root.parent / "herdr-client")}


def on_box(box: SimServer, *argv: str) -> dict[str, Any]:
    """One herdr command on the build box's own server (as a client there): its result, or {} when it failed."""
    done = subprocess.run([str(box.paths.bin / "herdr"), *argv], env=box.env(), capture_output=True, text=True, timeout=60)
    return json.loads(done.stdout)["result"] if done.returncode == 0 else {}


def box_held(box: SimServer) -> dict[str, list[str]]:
    """The panes and workspaces the build box's herdr holds (before the run: none of them is the run's)."""
    return {"panes": [p["pane_id"] for p in on_box(box, "pane", "list").get("panes", [])],
            "workspaces": [w["workspace_id"] for w in on_box(box, "workspace", "list").get("workspaces", [])]}


def split(argv: Sequence[str]) -> tuple[str, list[str]]:
    """Where a logged call went, and its command words: ("", herdr's words without --session) for the controller's
    herdr, (LABEL, herdr's words) for `herdr --machine LABEL …`, (TARGET, ["ssh", the remote argv…]) for a command
    over ssh, ("git", git's words) for a `git fetch` or `git push` (a remote worker's commit by its SHA, a base sent)."""
    name = os.path.basename(argv[0]) if argv else ""
    if name == "ssh" and "--" in argv:
        at = list(argv).index("--")
        return argv[at - 1], ["ssh", *shlex.split(argv[at + 1])]
    if name == "git":
        return "git", list(argv)
    words = list(argv[1:])
    if words[:1] == ["--session"]:
        return "", words[2:]
    if words[:1] == ["--machine"]:
        return words[1], words[2:]
    return "", words


def herdr_call(argv: Sequence[str]) -> bool:
    """A call to a herdr (the controller's, or another host's through `--machine`), not one over ssh or a fetch."""
    return bool(argv) and os.path.basename(argv[0]) not in ("ssh", "git")


def is_read(argv: Sequence[str]) -> bool:
    """A herdr call that changes nothing (any host's); a call over ssh or a fetch is never one."""
    _, words = split(argv)
    return tuple(words[:2]) in READS or tuple(words[:1]) in READS


class Stopped(Exception):
    """The matrix was interrupted: cases not yet started are skipped, running ones are killed and torn down."""


STOP = threading.Event()
_LIVE: set[subprocess.Popen[str]] = set()  # the orch processes the cases are running now
_LIVE_LOCK = threading.RLock()  # re-entrant: a signal handler may call stop_all while the main thread is in it


def run_orch(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """One `orch` process of a case, in a session of its own (SIGINT "to orch's process group" reaches orch and
    nothing of the harness), registered so an interrupted matrix can kill it."""
    with _LIVE_LOCK:
        if STOP.is_set():
            raise Stopped
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        _LIVE.add(proc)
    try:
        out, err = proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
    finally:
        with _LIVE_LOCK:
            _LIVE.discard(proc)
    if STOP.is_set():
        raise Stopped
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)


def stop_all() -> None:
    """Interrupted: no new case starts, every running orch is killed (its case then tears its stage down)."""
    with _LIVE_LOCK:
        STOP.set()
        for proc in _LIVE:
            kill_group(proc)


RUN_ID = re.compile(r"w\d+:p\d+-\d{8}T\d{6}Z")
TEMP_ROOT = re.compile(r"/[^ ]*/orch-crash-[^/ ]+")


def signature(argv: Sequence[str]) -> str | None:
    """A run-independent name for a counted call (ids differ from run to run; names, branches and texts do not)."""
    host, words = split(argv)
    words = [TEMP_ROOT.sub("<root>", RUN_ID.sub("<run>", word)) for word in words]
    path = tuple(words[:2])
    if path not in COUNTED:
        return None
    where = f"on {host}: " if host else ""  # ids and names are per host: the same on two hosts is no duplicate
    opts = dict(zip(words[2::1], words[3::1], strict=False))
    if path == ("worktree", "create"):
        return f"{where}worktree create {opts.get('--branch')}"
    if path == ("pane", "split"):
        return f"{where}pane split {opts.get('--cwd')}"
    if path == ("pane", "move"):
        return f"{where}pane move {opts.get('--label')}"
    if path == ("agent", "start"):
        return f"{where}agent start {words[2]}"
    text = words[4] if len(words) > 4 and words[3] == "--" else (words[3] if len(words) > 3 else "")
    return f"{where}agent prompt {words[2]} {' '.join(text.split())[:80]}"


def read_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_case(case: Case, parent: Path, keep: bool = False) -> Outcome:
    """Build a fresh world, run the plan with the case's crash, resume until it reports, and collect the facts."""
    started = time.monotonic()
    outcome = Outcome(case)
    if STOP.is_set():
        outcome.problems.append("not run: the matrix was interrupted")
        return outcome
    # Named orch-crash-* too: TEMP_ROOT then masks the whole case root in logged paths.
    root = Path(tempfile.mkdtemp(prefix="orch-crash-", dir=parent))
    stage = MatrixStage(root, "acme", hosts=PLAN == "remote")
    try:
        repo = stage.src_root / "acme" / "widgets"
        repo.mkdir(parents=True)
        build_project(repo)
        plan = root / "plan.toml"
        plan.write_text(demo_data("plan.toml") if PLAN == "demo" else (HERE / "wide_plan.toml").read_text() if PLAN == "wide" else "")
        env = stage.start()
        if PLAN == "wide":
            with open(stage.root / "scenarios.toml", "a", encoding="utf-8") as scenarios:
                scenarios.write("\n" + (HERE / "wide_scenarios.toml").read_text())
        assert stage.sim is not None
        env.update(ORCH_HOME=str(root / "orch-home"), ORCH_HERDR=str(stage.sim.paths.bin / "herdr"), ORCH_TEST_HERDR_CALLS=str(root / "calls.log"),
                   HERDR_SIM_CALL_LOG=str(root / "herdr.log"))
        env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
        env.pop("ORCH_TEST_CRASH_AT", None)
        held: dict[str, list[str]] = {}
        if PLAN == "remote":
            assert stage.box is not None
            held = box_held(stage.box)
            orch = root / "box-bin" / "orch"  # the box's orch, behind the wrapper that logs each spooled entry's id
            orch.parent.mkdir()
            orch.write_text(BOX_ORCH.format(orch=Path(sys.executable).parent / "orch", log=root / "spooled.log"))
            orch.chmod(0o755)
            plan.write_text(string.Template(demo_data("plan-hosts.toml")).substitute(checkout=stage.box_checkout, orch=orch,
                                                                                    orch_home=stage.box_root / "orch-home"))

        def orch(args: list[str], crash: str | None) -> subprocess.CompletedProcess[str]:
            run_env = dict(env)
            if crash:
                run_env["ORCH_TEST_CRASH_AT"] = crash
            return run_orch([*ORCH, *args], run_env)

        steps = [orch(["run", str(plan), "--json", "--interval", INTERVAL], case.run_crash)]
        run_calls = len(read_log(root / "calls.log"))
        final: dict[str, Any] | None = None
        for attempt in range(RESUMES + 1):
            last = steps[-1]
            if last.returncode in (0, 10, 11) and last.stdout.startswith("{"):
                done = json.loads(last.stdout)
                if done.get("finished"):
                    final = done
                    break
            if attempt == RESUMES:
                break
            if "no unfinished run in the ledger" in last.stderr:
                # Stopped before its run was recorded: nothing was made, and the message says to run the plan again.
                steps.append(orch(["run", str(plan), "--json", "--interval", INTERVAL], None))
                continue
            steps.append(orch(["resume", "--json", "--interval", INTERVAL], case.resume_crash if attempt == 0 else None))
        outcome.calls = read_log(root / "herdr.log")
        outcome.started = read_log(root / "calls.log")
        outcome.resume_calls = len(outcome.started) - run_calls
        outcome.facts["exits"] = [s.returncode for s in steps]
        outcome.facts["stderr"] = [s.stderr[-3000:] for s in steps]
        if final is None:
            outcome.problems.append(f"never reported after {len(steps) - 1} resumes (exits {outcome.facts['exits']})")
        else:
            report = final["report"]
            outcome.facts["verdict"] = report["verdict"]
            outcome.facts["workers"] = {w["task"]: f"{w.get('state')}/{w.get('disposition')}" for w in report["workers"]}
            outcome.facts["retired"] = report["retired"]
            outcome.facts["blockers"] = report["blockers"]
        outcome.facts["open"] = still_open(stage, env)
        outcome.facts["commits"] = commits(repo)
        outcome.facts["created_panes"] = created_panes(outcome.calls, env["HERDR_PANE_ID"])
        if stage.box is not None:
            outcome.facts.update(box_facts(stage, held, repo))
    except Stopped:
        outcome.problems.append("not finished: the matrix was interrupted")
    except Exception as exc:  # a broken case is a problem of that case, not the end of the matrix
        outcome.problems.append(f"harness: {type(exc).__name__}: {exc}")
    finally:
        if not keep:
            cleanup = stage.tear_down()
            if cleanup.problems:
                outcome.problems.append("tear-down: " + "; ".join(cleanup.problems))
        outcome.seconds = time.monotonic() - started
    return outcome


def still_open(stage: Stage, env: dict[str, str]) -> dict[str, list[str]]:
    """What herdr still holds besides the controller's own workspace and pane."""
    assert stage.sim is not None

    binary = str(stage.sim.paths.bin / "herdr")

    def herdr(*argv: str) -> dict[str, Any]:
        done = subprocess.run([binary, *argv], env=stage.sim.env(), capture_output=True, text=True, timeout=60)
        return json.loads(done.stdout)["result"] if done.returncode == 0 else {}

    panes = [p["pane_id"] for p in herdr("pane", "list").get("panes", []) if p["pane_id"] != env["HERDR_PANE_ID"]]
    workspaces = [w["workspace_id"] for w in herdr("workspace", "list").get("workspaces", []) if w["workspace_id"] != env["HERDR_WORKSPACE_ID"]]
    agents = [a.get("name") or a.get("pane_id") for a in herdr("agent", "list").get("agents", [])]
    return {"panes": panes, "workspaces": workspaces, "agents": agents}


def box_facts(stage: Stage, held: dict[str, list[str]], repo: Path) -> dict[str, Any]:
    """What the remote sample checks on the box and of its spool: what its herdr still holds, the worker branch's
    commits there, the worktrees its checkout still lists, the spool entries never acknowledged, and each spooled
    message's id against the ledger's records of it (``spool:buildbox:<id>``, each exactly once)."""
    assert stage.box is not None
    box, checkout, root = stage.box, stage.box_checkout, stage.root
    now = box_held(box)
    agents = [a.get("name") or a.get("pane_id") for a in on_box(box, "agent", "list").get("agents", [])]
    worktrees = subprocess.run(["git", "-C", str(checkout), "worktree", "list", "--porcelain"], capture_output=True, text=True, timeout=30).stdout
    left = sorted(p.name for p in (stage.box_root / "orch-home" / "spool").rglob("*") if p.is_file())
    sent = re.findall(r"^spooled (\S+) for run", (root / "spooled.log").read_text() if (root / "spooled.log").exists() else "", re.M)
    with contextlib.closing(sqlite3.connect(f"file:{root / 'orch-home' / 'ledger.sqlite3'}?mode=ro", uri=True)) as db:
        sources = [row[0] for row in db.execute("SELECT source FROM inbox WHERE source LIKE 'spool:%'")]
    recorded = collections.Counter(sources)
    heads = subprocess.run(["git", "-C", str(checkout), "for-each-ref", "--format=%(objectname) %(refname:short)", "refs/heads"],
                           capture_output=True, text=True, timeout=30).stdout.split("\n")
    missing = [name for sha, _, name in (line.partition(" ") for line in heads if line) if name != "main"
               and subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{sha}^{{commit}}"], capture_output=True, timeout=30).returncode != 0]
    return {
        # What the box's herdr held before the run (its own first workspace and pane) is not the run's.
        "box_open": {**{kind: [i for i in ids if i not in held[kind]] for kind, ids in now.items()}, "agents": agents},
        "box_commits": commits(checkout),
        "box_worktrees": [line.split(" ", 1)[1] for line in worktrees.splitlines() if line.startswith("worktree ") and line != f"worktree {checkout}"],
        "box_heads_missing_at_home": missing,
        "spool_left": left,
        "spooled": len(sent),
        "spool_unrecorded": [i for i in sent if recorded[f"spool:{BOX}:{i}"] == 0],
        "spool_twice": sorted(s for s, n in recorded.items() if n > 1),
    }


def commits(repo: Path) -> dict[str, list[str]]:
    """The agents' commit subjects on every branch but main (their own branches and the integration branch).

    Merge commits are left out: which sibling's verified head integration merges first (and so whether a shared
    branch takes one merge or two) follows the order the siblings' results are verified in, which is the agents'
    timing, crash or not. What must hold is the issue's "no agent commit lost": every agent commit on its branch and,
    merged, on the integration branch, exactly as in the clean run.
    """
    refs = subprocess.run(["git", "for-each-ref", "--format=%(refname:short)", "refs/heads"], cwd=repo, capture_output=True, text=True, timeout=30).stdout.split()
    found = {}
    for ref in refs:
        if ref == "main":
            continue
        log = subprocess.run(["git", "log", "--no-merges", "--format=%s", f"main..{ref}"], cwd=repo, capture_output=True, text=True, timeout=30).stdout
        found[ref] = sorted(re.sub(r"\b[0-9a-f]{12}\b", "<sha>", line) for line in log.splitlines())
    return found


def created_panes(calls: Iterable[dict[str, Any]], controller: str) -> list[str]:
    """Every pane id a creating herdr call answered with (``LABEL:id`` on another host, whose ids collide with ours)."""
    found: list[str] = []
    for call in calls:
        host, words = split(call["argv"])
        if host:
            words = [words[0], words[1], f"{host}:{words[2]}", *words[3:]] if len(words) > 2 else words
        if tuple(words[:2]) not in {("worktree", "create"), ("pane", "split"), ("pane", "move"), ("workspace", "create"), ("tab", "create")}:
            continue
        if call["rc"] != 0:
            continue
        if tuple(words[:2]) == ("pane", "move") and words[2] in found:
            found.remove(words[2])  # the moved pane lives on under the id the move answered with
        for pane in _pane_ids(json.loads(call["stdout"] or "{}")):
            pane = f"{host}:{pane}" if host else pane
            if pane != controller and pane not in found:
                found.append(pane)
    return found


def _pane_ids(data: Any) -> Iterable[str]:
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "pane_id" and isinstance(value, str):
                yield value
            else:
                yield from _pane_ids(value)
    elif isinstance(data, list):
        for value in data:
            yield from _pane_ids(value)


def judge(outcome: Outcome, clean: Outcome) -> None:
    """Compare a case with the clean run: verdict, dispositions, no duplicates, nothing open, panes reported, commits kept.

    A lost herdr call (orch alive) is settled in the run that made it: its case must need no resume."""
    facts, want = outcome.facts, clean.facts
    if outcome.case.run_crash and outcome.case.run_crash.endswith(":LOSE") and len(facts.get("exits", [])) > 1:
        outcome.problems.append(f"needed {len(facts['exits']) - 1} resume(s): the lost call was not settled in its own run (exits {facts['exits']})")
    if "verdict" in facts:
        if facts["verdict"] != want["verdict"]:
            outcome.problems.append(f"verdict {facts['verdict']} (clean: {want['verdict']})")
        if facts["workers"] != want["workers"]:
            outcome.problems.append(f"workers {facts['workers']} (clean: {want['workers']})")
        reported = {f"{item['host']}:{item['id']}" if item.get("host") else item["id"] for item in facts["retired"] if item["what"] == "pane"}
        missing = [p for p in facts["created_panes"] if p not in reported]
        if missing:
            outcome.problems.append(f"created panes missing from the report: {', '.join(missing)}")
        open_items = [item for item in facts["retired"] if item["status"] == "open"]
        if open_items:
            outcome.problems.append("report lists open: " + ", ".join(f"{i['what']} {i['id']}" for i in open_items))
    left = {k: v for k, v in facts.get("open", {}).items() if v}
    if left:
        outcome.problems.append(f"left open in herdr: {left}")
    if facts.get("commits") != want["commits"]:
        outcome.problems.append(f"commits {facts.get('commits')} (clean: {want['commits']})")
    if "box_open" in want:
        judge_box(outcome, clean)
    mine = collections.Counter(s for c in outcome.calls if (s := signature(c["argv"])))
    base = collections.Counter(s for c in clean.calls if (s := signature(c["argv"])))
    extra = mine - base
    outcome.duplicates += sum(extra.values())
    if extra:
        outcome.problems.append("made more than once: " + "; ".join(f"{s} x{n + base[s]}" for s, n in sorted(extra.items())))


def judge_box(outcome: Outcome, clean: Outcome) -> None:
    """The remote sample's own guarantees: nothing more of the run left on the box, the worker's commits kept there and
    held at home before its checkout went, every spooled message recorded exactly once and none left unacknowledged."""
    facts, want = outcome.facts, clean.facts
    if "box_open" not in facts:
        return  # the case never got that far: its problem is already said
    # The clean run leaves the box's repository workspace (herdr opened it, with a shell, for the worktree group the
    # remote `worktree create --cwd CHECKOUT` started): what a crash leaves must be no more than that.
    if facts["box_open"] != want["box_open"]:
        outcome.problems.append(f"left open on {BOX}: {facts['box_open']} (clean: {want['box_open']})")
    if facts["box_commits"] != want["box_commits"]:
        outcome.problems.append(f"commits on {BOX} {facts['box_commits']} (clean: {want['box_commits']})")
    if facts["box_worktrees"] != want["box_worktrees"]:
        outcome.problems.append(f"checkouts on {BOX} {facts['box_worktrees']} (clean: {want['box_worktrees']})")
    if facts["box_heads_missing_at_home"]:
        outcome.problems.append(f"{BOX}'s worker commits not held at home: {facts['box_heads_missing_at_home']}")
    if facts["spool_left"]:
        outcome.problems.append(f"spool entries never acknowledged on {BOX}: {facts['spool_left']}")
    if facts["spool_unrecorded"]:
        outcome.problems.append(f"spooled but never recorded: {facts['spool_unrecorded']}")
    if facts["spool_twice"]:
        outcome.duplicates += len(facts["spool_twice"])
        outcome.problems.append(f"spooled message recorded twice: {facts['spool_twice']}")
    if not facts["spooled"]:
        outcome.problems.append(f"nothing was spooled on {BOX}: the remote worker never called back")


def evidence(outcome: Outcome) -> str:
    """What a failed case leaves to go on: each step's exit and stderr, the report's items, and every herdr call that
    changed something, in the order herdr received them, with the pane ids it answered."""
    lines = [f"    exits {outcome.facts.get('exits')}"]
    lines += [f"    step {i} stderr: {err.strip()}" for i, err in enumerate(outcome.facts.get("stderr", [])) if err.strip()]
    lines += [f"    report item: {item}" for item in outcome.facts.get("retired", [])]
    for call in outcome.calls:
        host, words = split(call["argv"])
        if is_read(call["argv"]):
            continue
        words = [f"--machine {host}", *words] if host else words
        try:
            panes = sorted(set(_pane_ids(json.loads(call.get("stdout") or "{}"))))
        except ValueError:
            panes = []
        shown = " ".join(word if len(word) <= 60 else word[:57] + "..." for word in words)
        lines.append(f"    herdr (pid {call.get('pid')}): {shown} -> rc {call.get('rc')} {' '.join(panes)}")
    return "\n".join(lines)


def mutating(calls: Sequence[dict[str, Any]]) -> list[int]:
    """The call numbers (1-based, in `orch run`'s own count) of the calls that change something in herdr."""
    numbers = []
    for call in calls:
        if not is_read(call["argv"]):
            numbers.append(call["n"])
    return numbers


def first_cases(clean: Outcome, every: int = 1, offset: int = 0) -> list[Case]:
    """Every call twice (before/after) with SIGKILL; every mutating call with SIGTERM and SIGINT."""
    run_pid = clean.started[0]["pid"] if clean.started else None
    own = [c for c in clean.started if c["pid"] == run_pid]
    total = len(own)
    cases = [Case(f"kill-{when}-{n}", f"{n}:{when}:KILL") for n in range(1 + offset, total + 1, every) for when in ("before", "after")]
    for n in mutating(own)[offset::every]:
        cases.append(Case(f"term-{n}", f"{n}:before:TERM"))
        cases.append(Case(f"int-{n}", f"{n}:before:INT"))
    return cases


def call_key(argv: Sequence[str]) -> str:
    """The words a call to the other host is found by in the seam's count (``K:when:KILL:TEXT``): its herdr command with
    the machine, the remote command's own words over ssh (git's subcommand and option, orch's), or git's fetch."""
    host, words = split(argv)
    if herdr_call(argv):
        return f"--machine {host} {' '.join(words[:2])}"
    if host == "git":
        return f"{words[3]} --quiet"  # `git -C REPO fetch|push --quiet …`
    remote = [w for w in words[1:] if w != "env" and not re.fullmatch(r"[A-Z_]+=.*", w)]
    if remote[:2] == ["git", "-C"]:
        # `worktree remove`, `rev-parse --verify`, `rev-list` (not its SHA, which differs from run to run)
        return " ".join(w for w in remote[3:5] if w.isalpha() or w.startswith("-"))
    if os.path.basename(remote[0]) == "orch":
        return " ".join(remote[1:3])  # `inbox spooled`, `inbox ack`
    return " ".join(remote[:2])


# What a call over ssh changes or brings home: a spool listing is recorded in the ledger (then acknowledged), an
# acknowledgement removes entries there, a fetch makes a ref at home (a push, one there), `git worktree remove` removes
# a checkout there.
REMOTE_EFFECTS = ("inbox spooled", "inbox ack", "fetch --quiet", "push --quiet", "worktree remove")


def remote_cases(clean: Outcome, every: int = 1, offset: int = 0, reads: bool = False) -> list[Case]:
    """SIGKILL before and after each call of `orch run` that reaches the other host and changes something there or
    brings something home: its herdr's (`--machine`) creates, renames, starts, prompts, keys and closes, the spool's
    listing (recorded at home) and acknowledgement over ssh, the fetch of its commit by SHA, the removal of its checkout
    (``reads``: its reads too); every ``every``-th of them from ``offset``. Each is named by its words and its
    ordinal among the run's calls holding them (`kill-after-2:inbox ack`): the same call whatever reads come before."""
    run_pid = clean.started[0]["pid"] if clean.started else None
    own = [c["argv"] for c in clean.started if c["pid"] == run_pid]
    points = []
    for i, argv in enumerate(own):
        if split(argv)[0] and (reads or (not is_read(argv) if herdr_call(argv) else call_key(argv) in REMOTE_EFFECTS)):
            key = call_key(argv)
            points.append((sum(1 for before in own[: i + 1] if key in " ".join(before)), key))
    return [Case(f"kill-{when}-{k}:{key}", f"{k}:{when}:KILL:{key}") for k, key in points[offset::every] for when in ("before", "after")]


def unknown_cases(clean: Outcome, every: int = 1, offset: int = 0) -> list[Case]:
    """The herdr call killed (orch alive) before it reached herdr and after herdr acted, at every mutating call.

    A call is named by its command and its ordinal among that command's calls (`lose-after-pane-split-1`): reads
    interleave differently from run to run, the order of one command's calls much less."""
    run_pid = clean.started[0]["pid"] if clean.started else None
    own = [c for c in clean.started if c["pid"] == run_pid]
    seen: collections.Counter[str] = collections.Counter()
    points = []
    for call in own:
        _, words = split(call["argv"])
        if is_read(call["argv"]) or not herdr_call(call["argv"]):
            continue  # the seam loses only herdr calls (any host's), counted per command
        path = " ".join(words[:2])
        seen[path] += 1
        points.append((path, seen[path]))
    return [Case(f"lose-{when}-{path.replace(' ', '-')}-{k}", f"{k}:{when}:LOSE:{path}") for path, k in points[offset::every] for when in ("before", "after")]


def second_cases(first: int, resume_total: int, every: int = 1, offset: int = 0) -> list[Case]:
    """A second SIGKILL at every call of the resume that follows a SIGKILL just after call ``first``."""
    return [Case(f"kill-after-{first}-resume-kill-after-{m}", f"{first}:after:KILL", f"{m}:after:KILL") for m in range(1 + offset, resume_total + 1, every)]


def probe_points(clean: Outcome, count: int) -> list[int]:
    """``count`` mutating calls spread over the run: the first crashes whose resume is crashed again at every call."""
    own = [c for c in clean.started if c["pid"] == clean.started[0]["pid"]]
    muts = mutating(own)
    return sorted({muts[round(i * (len(muts) - 1) / max(1, count - 1))] for i in range(count)}) if muts else []


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("ORCH_CRASH_JOBS", "3")))
    parser.add_argument("--only", nargs="*", help="run only these cases (names as printed), e.g. kill-after-14")
    parser.add_argument("--second", type=int, default=6, help="first-crash points whose resume is crashed again at every call")
    parser.add_argument("--keep", action="store_true", help="keep the stages of the cases (debugging); they are left in the temp dir")
    parser.add_argument("--every", type=int, default=1, help="only every Nth call (a quicker, partial matrix while debugging)")
    parser.add_argument("--offset", type=int, default=0, help="with --every: start at this call (0-based), to split the matrix")
    parser.add_argument("--plan", choices=("demo", "wide", "remote"), default="demo",
                        help="the plan shape: the demo's 3 workers, or 5 (concurrency 2, `after`, two sibling pairs), or 2 on two "
                             "hosts (remote: SIGKILL before and after each call that reaches the second host, no second crashes)")
    parser.add_argument("--reads", action="store_true", help="with --plan remote: crash around the reads that reach the other host too")
    parser.add_argument("--list", action="store_true", help="with --plan remote: list the clean run's calls that reach the other host, and stop")
    parser.add_argument("--unknown", action="store_true",
                        help="the unknown-outcome matrix: kill the herdr call (orch alive) before and after every mutating call")
    args = parser.parse_args(argv)
    global PLAN
    PLAN = args.plan
    # A background job of a non-interactive shell starts with SIGINT ignored, and children inherit an ignored signal:
    # orch would never see the seam's SIGINT. With a handler here, children start with the default action instead.
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)
    for name, value in demo._GIT_ISOLATION.items():
        os.environ[name] = value
    # Every case starts two or more orch processes. Where PYTHONDONTWRITEBYTECODE is set (CI images often set it, and
    # the stage sets it for its panes), each compiled orch's sources afresh: ~0.2 s of CPU a process, a tenth of the
    # lane. Compiled once here, as installing a (non-editable) package does; a process still reads them with it set.
    for package in ("orchestrator", "packets", "registry", "herdr_sim"):
        compileall.compile_dir(PROJECT / package, quiet=1)
    # Every case's stage lives in one folder of the temp dir, removed on every way out (a case that failed included).
    # Named with the pid, as every temp entry of the project is (.ci/run tells a live session's entries from leftovers).
    parent = Path(tempfile.mkdtemp(prefix=f"orch-crash-{os.getpid()}-", dir=os.environ.get("ORCH_CRASH_TMP") or None))
    try:
        return _matrix(args, parent)
    except KeyboardInterrupt:
        print("crash matrix: interrupted; every stage was torn down", file=sys.stderr)
        return 130
    finally:
        if not args.keep:
            shutil.rmtree(parent, ignore_errors=True)
            if parent.exists():
                print(f"crash matrix: could not remove {parent}", file=sys.stderr)


def _interrupt(signum: int, frame: object) -> None:
    # SIGTERM and SIGHUP stop the matrix as Ctrl-C does: the running cases' orch processes are killed at once (each
    # case then tears its stage down: simulator, tmux, agents, temp folder), and no further case starts. A second
    # signal changes nothing: the tear-downs under way must finish, or their stages would be left behind.
    if STOP.is_set():
        return
    stop_all()
    raise KeyboardInterrupt


class Cases:
    """The cases running on a thread pool; leaving the block (an interrupt included) waits until every started case
    has torn its stage down, and cancels the ones not started."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.pool = ThreadPoolExecutor(max_workers=jobs)

    def __enter__(self) -> Cases:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if kind is not None:
            stop_all()
        self.pool.shutdown(wait=True, cancel_futures=True)

    def run(self, cases: Sequence[Case], parent: Path, keep: bool,
            then: Callable[[Outcome], Sequence[Case]] = lambda done: ()) -> Iterable[Outcome]:
        """Run the cases, yielding each outcome as it ends; ``then(outcome)`` may name more cases, which run next
        (before the ones still waiting): the second crashes of a probe are the longest cases, and a lane that ends
        with them waiting leaves CPUs idle at its end."""
        waiting = collections.deque(cases)
        running: set[Future[Outcome]] = set()
        while waiting or running:
            while waiting and len(running) < self.jobs:
                running.add(self.pool.submit(run_case, waiting.popleft(), parent, keep))
            finished, running = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                done = future.result()
                waiting.extendleft(reversed(then(done)))
                yield done


def _matrix(args: argparse.Namespace, parent: Path) -> int:
    began = time.monotonic()
    clean = run_case(Case("clean"), parent)
    if clean.problems or clean.facts.get("verdict") is None:
        print(f"crash matrix: the clean run did not report: {clean.problems} {clean.facts.get('stderr')}", file=sys.stderr)
        return 1
    print(f"clean run: {len(clean.calls)} herdr calls, verdict {clean.facts['verdict']}, {clean.seconds:.0f}s", file=sys.stderr)
    if args.plan == "remote":
        judge_box(clean, clean)  # what must hold of any run, crash or not (every message recorded once, …)
        if clean.problems:
            print(f"crash matrix: the clean run broke a guarantee: {' | '.join(clean.problems)}", file=sys.stderr)
            return 1
        # Every kind of side effect the sample is about must be in the clean run, or the sample silently lost it.
        named = {case.run_crash.split(":", 3)[3] for case in remote_cases(clean) if case.run_crash}
        lacking = [key for key in REMOTE_EFFECTS if key != "push --quiet" and key not in named]
        if lacking:
            print(f"crash matrix: the clean run made no call to {BOX} of: {', '.join(lacking)}", file=sys.stderr)
            return 1
        own = [c for c in clean.started if c["pid"] == clean.started[0]["pid"] and split(c["argv"])[0]]
        kinds = collections.Counter("herdr --machine" if herdr_call(c["argv"]) else split(c["argv"])[1][0] for c in own)
        print(f"clean run: {len(own)} calls reach {BOX} ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})", file=sys.stderr)
        if args.list:
            for case in remote_cases(clean, reads=True)[::2]:
                print(f"  {case.name.removeprefix('kill-before-')}", file=sys.stderr)
            return 0
    probed: set[Case] = set()
    if args.only:
        cases = [parse_case(name) for name in args.only]
        plan = f"{len(cases)} cases"
    elif args.unknown:
        cases = unknown_cases(clean, args.every, args.offset)
        plan = f"{len(cases)} lost herdr calls (orch alive)"
    elif args.plan == "remote":
        cases = remote_cases(clean, args.every, args.offset, args.reads)
        plan = f"{len(cases)} cases, SIGKILL around the calls that reach {BOX}"
    else:
        # The probes are the kill-after-N cases of the first-crash points themselves, run first: how many herdr calls
        # each one's resume made is the number of second crashes it gets, queued as soon as it is known.
        picks = probe_points(clean, args.second)
        probes = [Case(f"kill-after-{n}", f"{n}:after:KILL") for n in picks]
        cases = [*probes, *(case for case in first_cases(clean, args.every, args.offset) if case not in probes)]
        probed.update(probes)
        plan = f"{len(cases)} cases, then a second crash at every call of the resume after {len(picks)} of them"

    def then(done: Outcome) -> Sequence[Case]:
        if done.case not in probed or done.case.run_crash is None:
            return ()
        return second_cases(int(done.case.run_crash.split(":")[0]), max(1, done.resume_calls), args.every, args.offset)

    print(f"crash matrix: {plan}, on {args.jobs} jobs", file=sys.stderr)
    results: list[Outcome] = []
    with Cases(args.jobs) as pool:
        for done in pool.run(cases, parent, args.keep, then):
            judge(done, clean)
            results.append(done)
            mark = "ok" if not done.problems else "FAILED: " + " | ".join(done.problems)
            if done.case.run_crash and done.case.run_crash.split(":")[2:3] == ["KILL"] and done.facts.get("exits", [None])[0] != -signal.SIGKILL:
                mark += ", never stopped: this run made fewer such calls than the clean one"
            print(f"  {done.case.name}: {mark} ({done.seconds:.0f}s)", file=sys.stderr, flush=True)
            if done.problems:
                # A failed case is torn down like the others, so what it says here is all CI keeps of it.
                print(evidence(done), file=sys.stderr, flush=True)
    converged = sum(1 for r in results if not r.problems)
    duplicates = sum(r.duplicates for r in results)
    print(f"crash matrix: {converged}/{len(results)} converged, {duplicates} duplicates ({time.monotonic() - began:.0f}s)")
    return 0 if converged == len(results) else 1


def parse_case(name: str) -> Case:
    """A case from its printed name (for --only)."""
    keyed = re.fullmatch(r"kill-(before|after)-(\d+):(.+)", name)
    if keyed:
        return Case(name, f"{keyed[2]}:{keyed[1]}:KILL:{keyed[3]}")
    parts = name.split("-")
    if parts[0] == "kill" and parts[1] in ("before", "after") and len(parts) == 3:
        return Case(name, f"{parts[2]}:{parts[1]}:KILL")
    if parts[0] in ("term", "int"):
        return Case(name, f"{parts[1]}:before:{parts[0].upper()}")
    lose = re.fullmatch(r"lose-(before|after)-([a-z]+)-([a-z-]+)-(\d+)", name)
    if lose:
        return Case(name, f"{lose[4]}:{lose[1]}:LOSE:{lose[2]} {lose[3]}")
    if name.startswith("kill-after-") and "-resume-kill-after-" in name:
        first, second = name.removeprefix("kill-after-").split("-resume-kill-after-")
        return Case(name, f"{first}:after:KILL", f"{second}:after:KILL")
    raise SystemExit(f"unknown case name {name!r}")


if __name__ == "__main__":
    sys.exit(main())
