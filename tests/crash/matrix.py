"""The crash matrix: stop `orch run` at every herdr call of a clean run, `orch resume` until it reports, check it converged.

Not part of `python3 -m pytest` (it takes minutes); `.ci/run` runs it as its own lane:
`python3 tests/crash/matrix.py [--jobs N] [--only CASE ...]`. The demo's 3-worker plan runs on a private simulator
with a short settle. orch's herdr is a logging wrapper around the simulator (ORCH_HERDR), so every argv orch passed
to herdr and every answer is logged by the herdr process itself, even when orch dies during the call; the herdr
boundary's test seam (`orchestrator.herdr.CrashSeam`) signals orch just before or just after its call N.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator import demo
from orchestrator.demo import Stage, build_project, demo_data

ORCH = [sys.executable, "-m", "orchestrator"]
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
        return {**super().overrides(), "HERDR_SIM_SETTLE_MS": SETTLE_MS}


def command(argv: Sequence[str]) -> tuple[str, ...]:
    """The herdr command path of a logged argv (`agent prompt`), without --session."""
    words = list(argv[1:])
    if words[:1] == ["--session"]:
        words = words[2:]
    two = tuple(words[:2])
    return two if two in READS or two in COUNTED or len(words) < 2 or words[1].startswith("-") is False else tuple(words[:1])


RUN_ID = re.compile(r"w\d+:p\d+-\d{8}T\d{6}Z")
TEMP_ROOT = re.compile(r"/[^ ]*/orch-crash-[^/ ]+")


def signature(argv: Sequence[str]) -> str | None:
    """A run-independent name for a counted call (ids differ from run to run; names, branches and texts do not)."""
    words = [TEMP_ROOT.sub("<root>", RUN_ID.sub("<run>", word)) for word in argv[1:]]
    if words[:1] == ["--session"]:
        words = words[2:]
    path = tuple(words[:2])
    if path not in COUNTED:
        return None
    opts = dict(zip(words[2::1], words[3::1], strict=False))
    if path == ("worktree", "create"):
        return f"worktree create {opts.get('--branch')}"
    if path == ("pane", "split"):
        return f"pane split {opts.get('--cwd')}"
    if path == ("pane", "move"):
        return f"pane move {opts.get('--label')}"
    if path == ("agent", "start"):
        return f"agent start {words[2]}"
    text = words[4] if len(words) > 4 and words[3] == "--" else (words[3] if len(words) > 3 else "")
    return f"agent prompt {words[2]} {' '.join(text.split())[:80]}"


WRAPPER = """#!{python} -S
# herdr for the crash matrix: the simulator's CLI, logging argv, exit code and answer of every call (O_APPEND lines).
import contextlib, io, json, os, sys
sys.dont_write_bytecode = False
sys.path.append({root!r})
from herdr_sim.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
line = json.dumps({{"pid": os.getppid(), "argv": sys.argv, "rc": code, "stdout": out.getvalue()}}) + "\\n"
fd = os.open({log!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
os.write(fd, line.encode())
os.close(fd)
sys.stdout.write(out.getvalue())
sys.stdout.flush()
sys.exit(code)
"""


def write_wrapper(root: Path) -> Path:
    """The logging herdr (orch's ORCH_HERDR) of one case."""
    target = root / "herdr-logged"
    source = str(Path(demo.__file__).resolve().parents[1])
    target.write_text(WRAPPER.format(python=sys.executable, root=source, log=str(root / "herdr.log")))
    target.chmod(0o755)
    return target


def read_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_case(case: Case, keep: bool = False) -> Outcome:
    """Build a fresh world, run the plan with the case's crash, resume until it reports, and collect the facts."""
    started = time.monotonic()
    outcome = Outcome(case)
    root = Path(tempfile.mkdtemp(prefix="orch-crash-", dir=os.environ.get("ORCH_CRASH_TMP", "/tmp")))
    stage = MatrixStage(root, "acme")
    try:
        repo = stage.src_root / "acme" / "widgets"
        repo.mkdir(parents=True)
        build_project(repo)
        plan = root / "plan.toml"
        plan.write_text(demo_data("plan.toml"))
        env = stage.start()
        env.update(ORCH_HOME=str(root / "orch-home"), ORCH_HERDR=str(write_wrapper(root)), ORCH_TEST_HERDR_CALLS=str(root / "calls.log"))
        env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
        env.pop("ORCH_TEST_CRASH_AT", None)

        def orch(args: list[str], crash: str | None) -> subprocess.CompletedProcess[str]:
            run_env = dict(env)
            if crash:
                run_env["ORCH_TEST_CRASH_AT"] = crash
            # A session of its own: SIGINT "to orch's process group" reaches orch and nothing of the harness.
            return subprocess.run([*ORCH, *args], env=run_env, capture_output=True, text=True, timeout=600, start_new_session=True)

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
    except Exception as exc:  # a broken case is a problem of that case, not the end of the matrix
        outcome.problems.append(f"harness: {type(exc).__name__}: {exc}")
    finally:
        if not keep:
            stage.tear_down()
        outcome.seconds = time.monotonic() - started
    return outcome


def still_open(stage: Stage, env: dict[str, str]) -> dict[str, list[str]]:
    """What herdr still holds besides the controller's own workspace and pane."""
    assert stage.sim is not None

    def herdr(*argv: str) -> dict[str, Any]:
        done = stage.sim.run(list(argv))
        return json.loads(done.stdout)["result"] if done.returncode == 0 else {}

    panes = [p["pane_id"] for p in herdr("pane", "list").get("panes", []) if p["pane_id"] != env["HERDR_PANE_ID"]]
    workspaces = [w["workspace_id"] for w in herdr("workspace", "list").get("workspaces", []) if w["workspace_id"] != env["HERDR_WORKSPACE_ID"]]
    agents = [a.get("name") or a.get("pane_id") for a in herdr("agent", "list").get("agents", [])]
    return {"panes": panes, "workspaces": workspaces, "agents": agents}


def commits(repo: Path) -> dict[str, list[str]]:
    """Commit subjects on every branch but main (the agents' work and the integration branch)."""
    refs = subprocess.run(["git", "for-each-ref", "--format=%(refname:short)", "refs/heads"], cwd=repo, capture_output=True, text=True, timeout=30).stdout.split()
    found = {}
    for ref in refs:
        if ref == "main":
            continue
        log = subprocess.run(["git", "log", "--format=%s", f"main..{ref}"], cwd=repo, capture_output=True, text=True, timeout=30).stdout
        found[ref] = sorted(re.sub(r"\b[0-9a-f]{12}\b", "<sha>", line) for line in log.splitlines())
    return found


def created_panes(calls: Iterable[dict[str, Any]], controller: str) -> list[str]:
    """Every pane id a creating herdr call answered with."""
    found: list[str] = []
    for call in calls:
        words = call["argv"][1:]
        if words[:1] == ["--session"]:
            words = words[2:]
        if tuple(words[:2]) not in {("worktree", "create"), ("pane", "split"), ("pane", "move"), ("workspace", "create"), ("tab", "create")}:
            continue
        if call["rc"] != 0:
            continue
        if tuple(words[:2]) == ("pane", "move") and words[2] in found:
            found.remove(words[2])  # the moved pane lives on under the id the move answered with
        for pane in _pane_ids(json.loads(call["stdout"] or "{}")):
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
    """Compare a case with the clean run: verdict, dispositions, no duplicates, nothing open, panes reported, commits kept."""
    facts, want = outcome.facts, clean.facts
    if "verdict" in facts:
        if facts["verdict"] != want["verdict"]:
            outcome.problems.append(f"verdict {facts['verdict']} (clean: {want['verdict']})")
        if facts["workers"] != want["workers"]:
            outcome.problems.append(f"workers {facts['workers']} (clean: {want['workers']})")
        reported = {item["id"] for item in facts["retired"] if item["what"] == "pane"}
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
    mine = collections.Counter(s for c in outcome.calls if (s := signature(c["argv"])))
    base = collections.Counter(s for c in clean.calls if (s := signature(c["argv"])))
    extra = mine - base
    outcome.duplicates = sum(extra.values())
    if extra:
        outcome.problems.append("made more than once: " + "; ".join(f"{s} x{n + base[s]}" for s, n in sorted(extra.items())))


def mutating(calls: Sequence[dict[str, Any]]) -> list[int]:
    """The call numbers (1-based, in `orch run`'s own count) of the calls that change something in herdr."""
    numbers = []
    for call in calls:
        words = call["argv"][1:]
        if words[:1] == ["--session"]:
            words = words[2:]
        if tuple(words[:2]) not in READS and tuple(words[:1]) not in READS:
            numbers.append(call["n"])
    return numbers


def cases_for(clean: Outcome, resume_probe: dict[int, int], every: int = 1) -> list[Case]:
    """Every call twice (before/after) with SIGKILL; every mutating call with SIGTERM and SIGINT; second crashes."""
    run_pid = clean.started[0]["pid"] if clean.started else None
    own = [c for c in clean.started if c["pid"] == run_pid]
    total = len(own)
    cases = [Case(f"kill-{when}-{n}", f"{n}:{when}:KILL") for n in range(1, total + 1, every) for when in ("before", "after")]
    for n in mutating(own)[::every]:
        cases.append(Case(f"term-{n}", f"{n}:before:TERM"))
        cases.append(Case(f"int-{n}", f"{n}:before:INT"))
    for first, resume_total in sorted(resume_probe.items()):
        for m in range(1, resume_total + 1, every):
            cases.append(Case(f"kill-after-{first}-resume-kill-after-{m}", f"{first}:after:KILL", f"{m}:after:KILL"))
    return cases


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("ORCH_CRASH_JOBS", "3")))
    parser.add_argument("--only", nargs="*", help="run only these cases (names as printed), e.g. kill-after-14")
    parser.add_argument("--second", type=int, default=6, help="first-crash points whose resume is crashed again at every call")
    parser.add_argument("--keep", action="store_true", help="keep the stages of failing cases (debugging)")
    parser.add_argument("--every", type=int, default=1, help="only every Nth call (a quicker, partial matrix while debugging)")
    args = parser.parse_args(argv)
    # A background job of a non-interactive shell starts with SIGINT ignored, and children inherit that: orch would
    # never see the matrix's Ctrl-C. Children of this process start with the default action instead.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    for name, value in demo._GIT_ISOLATION.items():
        os.environ[name] = value
    began = time.monotonic()
    clean = run_case(Case("clean"))
    if clean.problems or clean.facts.get("verdict") is None:
        print(f"crash matrix: the clean run did not report: {clean.problems} {clean.facts.get('stderr')}", file=sys.stderr)
        return 1
    print(f"clean run: {len(clean.calls)} herdr calls, verdict {clean.facts['verdict']}, {clean.seconds:.0f}s", file=sys.stderr)
    if args.only:
        cases = [parse_case(name) for name in args.only]
    else:
        own = [c for c in clean.started if c["pid"] == clean.started[0]["pid"]]
        muts = mutating(own)
        picks = [muts[round(i * (len(muts) - 1) / max(1, args.second - 1))] for i in range(args.second)] if muts else []
        probe: dict[int, int] = {}
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for first, done in zip(picks, pool.map(lambda n: run_case(Case(f"probe-{n}", f"{n}:after:KILL")), picks), strict=True):
                probe[first] = max(1, done.resume_calls)
        cases = cases_for(clean, probe, args.every)
    print(f"crash matrix: {len(cases)} cases on {args.jobs} jobs", file=sys.stderr)
    results: list[Outcome] = []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_case, case, args.keep): case for case in cases}
        for future in as_completed(futures):
            done = future.result()
            judge(done, clean)
            results.append(done)
            mark = "ok" if not done.problems else "FAILED: " + " | ".join(done.problems)
            print(f"  {done.case.name}: {mark} ({done.seconds:.0f}s)", file=sys.stderr, flush=True)
            if done.problems and os.environ.get("ORCH_CRASH_VERBOSE"):
                for i, err in enumerate(done.facts.get("stderr", [])):
                    print(f"    step {i} stderr: {err}", file=sys.stderr)
    converged = sum(1 for r in results if not r.problems)
    duplicates = sum(r.duplicates for r in results)
    print(f"crash matrix: {converged}/{len(results)} converged, {duplicates} duplicates ({time.monotonic() - began:.0f}s)")
    return 0 if converged == len(results) else 1


def parse_case(name: str) -> Case:
    """A case from its printed name (for --only)."""
    parts = name.split("-")
    if parts[0] == "kill" and parts[1] in ("before", "after") and len(parts) == 3:
        return Case(name, f"{parts[2]}:{parts[1]}:KILL")
    if parts[0] in ("term", "int"):
        return Case(name, f"{parts[1]}:before:{parts[0].upper()}")
    if name.startswith("kill-after-") and "-resume-kill-after-" in name:
        first, second = name.removeprefix("kill-after-").split("-resume-kill-after-")
        return Case(name, f"{first}:after:KILL", f"{second}:after:KILL")
    raise SystemExit(f"unknown case name {name!r}")


if __name__ == "__main__":
    sys.exit(main())
