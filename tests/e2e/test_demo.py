"""`orch demo` as a real process without a terminal: PASS with three workers, and nothing it started survives it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from interrupt import interruptible

from registry import Ledger

ORCH = [sys.executable, "-m", "orchestrator"]
ROOT = Path(__file__).resolve().parents[2]

DISCLAIMER = (
    "orch demo: the real `orch run` engine drives a 3-worker plan on a private, simulated herdr.\n"
    "The agents are scripted stand-ins (herdr_sim), not real coding agents; your herdr, tmux and repositories are not touched.\n"
    "With a real herdr the same plan drives real agents: inside a herdr pane, run `orch run plan.toml`.\n"
)


@pytest.fixture
def short_tmpdir() -> Iterator[Path]:
    # The demo's stage goes under TMPDIR; unix socket paths inside it must stay short, so not under pytest's tmp_path.
    path = Path(tempfile.mkdtemp(prefix=f"od-{os.getpid()}-", dir="/tmp"))  # the pid: tests/conftest.py checks none is left
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _processes_mentioning(text: str) -> list[int]:
    """Live processes (other than this one) whose environment or argv mentions ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid() or not _alive(int(entry.name)):
            continue
        try:
            blob = (entry / "environ").read_bytes() + (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if text.encode() in blob:
            found.append(int(entry.name))
    return found


def test_demo_passes_with_three_workers_and_leaves_only_its_ledger_and_report(isolated_env: Path, short_tmpdir: Path) -> None:
    env = {**os.environ, "TMPDIR": str(short_tmpdir)}

    done = subprocess.run([*ORCH, "demo", "--json"], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    cleanup, run_id = outcome["cleanup"], outcome["run_id"]
    state = isolated_env / ".local" / "state" / "orch" / "demo"
    stage = Path(cleanup["temp_dir"])
    assert stage.parent == short_tmpdir
    run_dir = state / "runs" / run_id.replace(":", "_")

    # The narrative: the disclaimer first, then where things are; the closing lines say what was removed.
    stderr = done.stderr.replace(str(stage), "<stage>").replace(str(state), "<state>").replace(run_id, "<run>")
    assert stderr.startswith(
        DISCLAIMER
        + "Stage: <stage> (repository, worktrees, simulated herdr; removed at the end)\n"
        "State: <state> (the run's ledger and report stay here)\n"
    ), stderr
    pids = cleanup["process_ids"]
    assert stderr.endswith(
        f"Report: <state>/runs/{run_dir.name}/report.md\n"
        "Ledger: <state>/ledger.sqlite3 (`ORCH_HOME=<state> orch report --run <run>`)\n"
        f"Plan: <state>/runs/{run_dir.name}/plan.toml (inside a real herdr pane: `orch run plan.toml`)\n"
        f"Cleaned up: the simulated herdr (server pid {cleanup['server_pid']}, {len(pids)} processes ended, <stage> removed); "
        "tmux socket <stage>/sim/tmux.sock closed.\n"
    ), stderr

    # Retiring takes seconds per worker (each agent is asked to exit and waited for): every step says so as it goes,
    # between the last acceptance and the workers' retired lines.
    lines = [line.split(" ", 1)[1] for line in stderr.splitlines() if re.match(r"\d\d:\d\d:\d\d ", line)]
    start = lines.index("retiring 3 workers: asking each agent to exit, then closing panes and removing worktrees")
    assert re.fullmatch(r"(greeting|area-tests|usage-docs): accepted \(last callback: result\)", lines[start - 1]), stderr
    assert lines[start:] == [
        "retiring 3 workers: asking each agent to exit, then closing panes and removing worktrees",
        "greeting: agent exited, pane closed (1 of 3)",
        "area-tests: agent exited, pane closed (2 of 3)",
        "usage-docs: agent exited, pane closed (3 of 3)",
        "retiring: removing the worktrees that hold no work",
        "greeting: retired (last callback: result)",
        "area-tests: retired (last callback: result)",
        "usage-docs: retired (last callback: result)",
    ], stderr

    # The final report, read back from the ledger the demo left behind: PASS with the three workers.
    assert (outcome["finished"], outcome["exit_code"], outcome["report"]["verdict"]) == (True, 0, "PASS")
    assert (outcome["state_dir"], outcome["ledger"], outcome["report_path"]) == (
        str(state), str(state / "ledger.sqlite3"), str(run_dir / "report.md"))
    assert (run_dir / "report.md").is_file() and (run_dir / "plan.toml").is_file()
    # Exactly what the README says stays: the ledger, and per run its plan, packets and report (the integration
    # worktree was removed by retire once every worker was retired, and belonged to the throwaway repository anyway).
    assert sorted(str(p.relative_to(state)) for p in state.rglob("*") if not p.name.startswith("ledger.sqlite3")) == [
        "runs", f"runs/{run_dir.name}", f"runs/{run_dir.name}/driver.lock", f"runs/{run_dir.name}/limits.json", f"runs/{run_dir.name}/orch.log", f"runs/{run_dir.name}/packets",
        *(f"runs/{run_dir.name}/packets/{task}.md" for task in ("area-tests", "greeting", "usage-docs")),
        f"runs/{run_dir.name}/plan.toml", f"runs/{run_dir.name}/report.md", f"runs/{run_dir.name}/report_roots.json", f"runs/{run_dir.name}/reports",
        *(f"runs/{run_dir.name}/reports/{task}" for task in ("area-tests", "greeting", "usage-docs")),
        f"runs/{run_dir.name}/transcripts",
        *(f"runs/{run_dir.name}/transcripts/{task}.txt" for task in ("area-tests", "greeting", "usage-docs")),
    ]  # fmt: skip
    shown = subprocess.run([*ORCH, "report", "--run", run_id], env={**env, "ORCH_HOME": str(state)},
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout.replace(str(stage), "<stage>").replace(str(state), "<state>").replace(run_dir.name, "<run folder>").replace(run_id, "<run>")
    text = re.sub(r"pane w1:p[2-9]", "pane w1:pN", re.sub(r"workspace w[2-9]", "workspace wN", text))
    text = re.sub(r"\b[0-9a-f]{7}\b", "<sha>", text)
    assert text == (
        "Herdr: PASS\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: greeting=retired/accepted+integrated, area-tests=retired/accepted+integrated, "
        "usage-docs=retired/accepted+integrated\n"
        "Callbacks: run <run>; greeting 2 accepted (update, result); area-tests 1 accepted (result); "
        "usage-docs 2 accepted (question, result); missing result: none\n"
        "Verification: greeting: `python3 -m unittest discover -s tests -q` exit 0 -> accepted; "
        "area-tests: `python3 -m unittest discover -s tests -q -p 'test_area*.py'` exit 0 -> accepted; "
        "usage-docs: `grep -q 'Python 3.11' docs/usage.md` exit 0 -> accepted\n"
        "Retired: greeting pane w1:pN closed; greeting worktree <stage>/src/acme/widgets.worktrees/widgets-feat-greeting "
        "removed; greeting workspace wN closed (by herdr when its pane moved out); area-tests pane w1:pN closed; usage-docs pane w1:pN closed; "
        "usage-docs worktree <stage>/src/acme/widgets.worktrees/widgets-docs-usage removed; usage-docs workspace wN closed (by herdr when its pane moved out); "
        "run worktree <state>/runs/<run folder>/integration removed (chore/demo-integration keeps its merges)\n"
        "Blockers: none\n"
    )

    # Nothing it started is left: no temp repository, no server, no tmux server, no pane or agent process.
    assert (cleanup["removed"], cleanup["problems"]) == (True, [])
    assert cleanup["server_pid"] in pids and len(pids) >= 3  # server, tmux, the controller pane's shell at least
    assert not stage.exists()
    assert list(short_tmpdir.iterdir()) == []  # not even agents' check reports under TMPDIR
    assert [pid for pid in pids if _alive(pid)] == []
    assert _processes_mentioning(str(stage)) == []
    tmux = subprocess.run(["tmux", "-S", cleanup["tmux_socket"], "list-sessions"], capture_output=True, timeout=10)
    assert tmux.returncode != 0


def _state_listing(state: Path, run_folder: str) -> list[str]:
    """What the README says `orch demo` leaves under $ORCH_HOME/demo for one run (besides the ledger)."""
    run = f"runs/{run_folder}"
    tasks = ("area-tests", "greeting", "usage-docs")
    return [
        "runs", run, f"{run}/driver.lock", f"{run}/limits.json", f"{run}/orch.log", f"{run}/packets",
        *(f"{run}/packets/{task}.md" for task in tasks),
        f"{run}/plan.toml", f"{run}/report.md", f"{run}/report_roots.json", f"{run}/reports",
        *(f"{run}/reports/{task}" for task in tasks),
        f"{run}/transcripts", *(f"{run}/transcripts/{task}.txt" for task in tasks),
    ]


def test_demo_hosts_runs_a_worker_on_a_simulated_build_box_and_leaves_only_its_ledger_and_report(
    isolated_env: Path, short_tmpdir: Path, golden: Callable[[str, str], None],
) -> None:
    env = {**os.environ, "TMPDIR": str(short_tmpdir)}

    done = subprocess.run([*ORCH, "demo", "--hosts"], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240)

    assert done.returncode == 0, done.stdout + done.stderr
    [stage_line] = [line for line in done.stdout.splitlines() if line.startswith("Stage: ")]
    stage = Path(stage_line.split()[1])
    assert stage.parent == short_tmpdir
    state = isolated_env / ".local" / "state" / "orch" / "demo"
    [run_dir] = (state / "runs").iterdir()
    run_id = run_dir.name.replace("_", ":", 1)

    def masked(text: str) -> str:
        text = text.replace(str(stage), "<stage>").replace(str(state), "<state>").replace(run_dir.name, "<run folder>").replace(run_id, "<run>")
        text = re.sub(r"\b[0-9a-f]{40}\b", "<sha>", re.sub(r"\b[0-9a-f]{7}\b", "<sha>", text))
        text = re.sub(r"server pids \d+ and \d+, \d+ processes", "server pids P and Q, N processes", text)
        # The controller's ids of its two workers depend on which was provisioned first; the build box's are its own.
        text = re.sub(r"pane w1:p[2-9](?! on)", "pane w1:pN", re.sub(r"workspace w[2-9](?! on)", "workspace wN", text))
        return re.sub(r"\borch \d+\.\d+\.\d+\b", "orch <version>", text)

    # Everything the person reads on stdout: what the demo is, where things are, the report naming each host, the
    # clean-up of both simulated herdrs; and on stderr the checklist with the build box checked before anything ran.
    golden("demo_hosts.txt", masked(done.stdout))
    checklist = done.stderr[:done.stderr.index(f"{run_id}\n")]
    golden("demo_hosts_preflight.txt", masked(checklist))

    # Its callbacks came through the build box's spool, collected over ssh, never through the controller's inbox.
    with Ledger.open(state / "ledger.sqlite3", create=False) as ledger:
        inbox = ledger.list_inbox(run_id)
    sources = sorted((m.task_label, m.kind, m.verdict, m.source.rsplit(":", 1)[0] if m.source.startswith("spool:") else m.source) for m in inbox)
    assert sources == [("area-tests", "result", "accepted", "cli"), ("greeting", "result", "accepted", "cli"), ("greeting", "update", "accepted", "cli"),
                       ("usage-docs", "question", "accepted", "spool:buildbox"), ("usage-docs", "result", "accepted", "spool:buildbox")]
    # Its commit was fetched home by SHA, asking the box's upload-pack for exactly that commit.
    log = (run_dir / "orch.log").read_text()
    fetched = re.findall(r"fetch .*? me@buildbox:(\S+) \+([0-9a-f]{40}):refs/orch/" + re.escape(run_dir.name) + r"/usage-docs", log)
    assert [path for path, _ in fetched] == [f"{stage}/buildbox/src/acme/widgets"], log
    assert sorted(str(p.relative_to(state)) for p in state.rglob("*") if not p.name.startswith("ledger.sqlite3")) == _state_listing(state, run_dir.name)

    # Nothing it started is left on either host: both servers, tmux servers, panes and agents, the stage.
    assert not stage.exists() and list(short_tmpdir.iterdir()) == []
    assert _processes_mentioning(str(stage)) == []
    for sim in ("sim", "box-sim"):
        tmux = subprocess.run(["tmux", "-S", str(stage / sim / "tmux.sock"), "list-sessions"], capture_output=True, timeout=10)
        assert tmux.returncode != 0


def test_ctrl_c_mid_run_removes_everything_and_exits_130(isolated_env: Path, short_tmpdir: Path) -> None:
    env = {**os.environ, "TMPDIR": str(short_tmpdir)}
    demo = subprocess.Popen(interruptible([*ORCH, "demo"]), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert demo.stderr is not None
        lines = []
        # Interrupt once the agents run (dispatched, working) in their worktree panes. A worker whose first callback
        # came before orch's first look shows it: "greeting: working (last callback: update)".
        while not re.search(r": working( \(last callback: \w+\))?\n\Z", line := demo.stderr.readline()):
            assert line, "".join(lines)
            lines.append(line)
        [stage] = short_tmpdir.iterdir()  # the demo's stage (its path is on stdout, buffered until the end)
        demo.send_signal(subprocess.signal.SIGINT)
        rest = demo.stderr.read()
        code = demo.wait(timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
    assert code == 130, rest
    last = rest.replace(str(stage), "<stage>").splitlines()[-2:]
    assert re.sub(r"server pid \d+, \d+ processes", "server pid P, N processes", last[0]) == (
        "orch: demo interrupted; everything it started was removed (server pid P, N processes ended, <stage> removed)")
    assert last[1] == f"hint: its ledger stays in {isolated_env}/.local/state/orch/demo; run `orch demo` again for a fresh one"
    assert not stage.exists() and list(short_tmpdir.iterdir()) == []
    assert _processes_mentioning(str(stage)) == []


def _snapshot(root: Path, skip: Path) -> dict[str, str]:
    """Every path under ``root`` (relative) -> what it is: a file's sha256 and mode, a directory, a link's target.

    ``skip`` (orch's own documented state folder) and the directories leading to it are left out: the demo may create them.
    """
    import hashlib

    leading = {skip, *skip.parents}
    seen: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if path == skip or skip in path.parents or (path.is_dir() and not path.is_symlink() and path in leading):
            continue
        mode = oct(path.lstat().st_mode)
        if path.is_symlink():
            seen[str(path.relative_to(root))] = f"link {os.readlink(path)}"
        elif path.is_dir():
            seen[str(path.relative_to(root))] = f"dir {mode}"
        else:
            seen[str(path.relative_to(root))] = f"file {mode} {hashlib.sha256(path.read_bytes()).hexdigest()}"
    return seen


@pytest.mark.parametrize("mode", [[], ["--hosts"]], ids=["one-host", "two-hosts"])
def test_demo_leaves_every_file_of_the_callers_home_byte_identical(tmp_path: Path, short_tmpdir: Path, mode: list[str]) -> None:
    # Issue 21: the simulator's pane shells ran with the person's HOME, and bash's default HISTFILESIZE cut a
    # 5,000-line ~/.bash_history to its last 500 lines. Run the demo as a new user would (their HOME, no XDG or git
    # overrides, a .bashrc, a git config with a hook path) and require every file there unchanged but orch's own
    # documented state folder ($ORCH_HOME/demo, by default ~/.local/state/orch/demo).
    home = tmp_path / "person"
    home.mkdir()
    (home / ".bash_history").write_text("".join(f"echo history line {n}\n" for n in range(5000)))
    (home / ".bashrc").write_text("export FROM_BASHRC=1\nHISTSIZE=100\n")
    (home / ".profile").write_text("echo profile >> ~/profile-ran\n")
    (home / ".python_history").write_text("print(1)\n")
    (home / ".gitconfig").write_text("[user]\n\tname = Person\n\temail = person@example.invalid\n")
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "ignore").write_text("*.swp\n")
    (home / "notes.txt").write_bytes(bytes(range(256)))
    (home / ".local" / "share").mkdir(parents=True)
    (home / ".local" / "share" / "keep").write_text("mine\n")
    state = home / ".local" / "state" / "orch" / "demo"
    before = _snapshot(home, state)
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("XDG_", "GIT_", "TMUX")) and name not in ("HISTFILE", "HISTSIZE", "HISTFILESIZE")}
    env.update(HOME=str(home), TMPDIR=str(short_tmpdir))

    done = subprocess.run([*ORCH, "demo", *mode, "--json"], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240)

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["state_dir"] == str(state)
    assert _snapshot(home, state) == before
    assert len((home / ".bash_history").read_text().splitlines()) == 5000
    assert (state / "ledger.sqlite3").is_file()


def _fenced(text: str, after: str, lang: str) -> str:
    """The first fenced block of ``lang`` after the heading line ``after``."""
    rest = text[text.index(after + "\n"):]
    start = rest.index(f"```{lang}\n") + len(lang) + 4
    return rest[start:rest.index("```\n", start)]


def test_readme_quick_start_is_the_two_commands_and_shows_the_example_plan_verbatim() -> None:
    readme = (ROOT / "README.md").read_text()
    assert _fenced(readme, "## Quick start", "sh") == (
        "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/orch demo\n"
        ".venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest -n 4\n"
    )
    assert _fenced(readme, "## The plan file", "toml") == (ROOT / "examples" / "plan.toml").read_text()
