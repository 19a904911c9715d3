"""The scripted agents in a real pty, with a fake `herdr` on PATH recording argv, and real git repos."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pexpect
import pytest

from herdr_sim.agent import screens

DATA = Path(__file__).parent / "agent_data"
RUN = "r-20260101-1"
HEADER = "[herdr-orchestration run={run} task={task} from={sender} kind={kind} reply-to={reply}]"
FAKE_HERDR = """#!{python}
import json, os, sys
with open(os.environ["FAKE_HERDR_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:4] == ["agent", "prompt", "gone"]:
    sys.stderr.write('{{"id":"cli:agent:prompt","error":{{"code":"agent_not_found","message":"agent target gone not found"}}}}\\n')
    sys.exit(1)
"""


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, timeout=30).stdout


@dataclass
class World:
    """A repo with a worker worktree, a fake herdr, and the agent's environment."""

    tmp: Path
    repo: Path
    workdir: Path
    base: str
    env: dict[str, str]

    @property
    def scenarios(self) -> Path:
        return Path(self.env["HERDR_SIM_HOME"]) / "scenarios.toml"

    def packet(self, prefix: str = "herdr agent prompt w1:p1", workdir: Path | None = None) -> str:
        text = (DATA / "packet.txt").read_text()
        for key, value in {"@REPO@": str(self.repo), "@WORKDIR@": str(workdir or self.workdir), "@BASE@": self.base, "@PREFIX@": prefix}.items():
            text = text.replace(key, value)
        return text

    def calls(self) -> list[list[str]]:
        """Recorded herdr argv lists, with report seqs checked strictly increasing and then masked."""
        log = Path(self.env["FAKE_HERDR_LOG"])
        rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        seqs = [int(row[row.index("--seq") + 1]) for row in rows if "--seq" in row]
        assert seqs == sorted(set(seqs))
        return [[("<seq>" if i and row[i - 1] == "--seq" else arg) for i, arg in enumerate(row)] for row in rows]


@pytest.fixture
def world(tmp_path: Path) -> World:
    repo, workdir, bin_dir = tmp_path / "repo", tmp_path / "wt", tmp_path / "bin"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("hello\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "init")
    git(repo, "worktree", "add", "-q", "-b", "orch/feature-a", str(workdir), "main")
    bin_dir.mkdir()
    (bin_dir / "herdr").write_text(FAKE_HERDR.format(python=sys.executable))
    (bin_dir / "herdr").chmod(0o755)
    (tmp_path / "tmp").mkdir()
    env = dict(os.environ)
    env.update(
        PATH=f"{bin_dir}:{env['PATH']}",
        FAKE_HERDR_LOG=str(tmp_path / "herdr-calls.jsonl"),
        HERDR_ENV="1",
        HERDR_PANE_ID="w1:p2",
        HERDR_SOCKET_PATH=str(tmp_path / "herdr.sock"),
        HERDR_SIM_HOME=str(tmp_path / "sim"),
        TMPDIR=str(tmp_path / "tmp"),
        TERM="xterm-256color",
    )
    return World(tmp=tmp_path, repo=repo, workdir=workdir, base=git(repo, "rev-parse", "HEAD").strip(), env=env)


class Pane:
    """One agent process on a pty, as in a herdr pane."""

    def __init__(self, world: World, kind: str = "codex") -> None:
        self.screen = io.StringIO()
        self.child = pexpect.spawn(
            sys.executable,
            ["-c", f"from herdr_sim.agent import main; main({kind!r})"],
            env=world.env,
            cwd=str(world.workdir),
            encoding="utf-8",
            timeout=20,
            dimensions=(60, 220),
        )
        self.child.logfile_read = self.screen
        self.mark = "\r\n" + screens.prompt(kind)
        self.until_prompt()

    def until_prompt(self) -> None:
        """Wait until the agent is back at its prompt (it reports idle/blocked before drawing it)."""
        self.child.expect_exact(self.mark)

    def wait_for(self, text: str) -> None:
        self.child.expect_exact(text)

    def paste(self, text: str) -> None:
        """Submit like `herdr agent prompt`: a bracketed paste then Enter, in one write."""
        self.child.send(f"\x1b[200~{text}\x1b[201~\r")

    def type(self, text: str) -> None:
        self.child.send(text + "\r")

    def exit_status(self) -> int:
        self.child.expect(pexpect.EOF)
        self.child.close()
        assert self.child.exitstatus is not None
        return self.child.exitstatus

    def transcript(self) -> str:
        text = self.screen.getvalue().replace("\r", "")
        return text.replace("\x1b[?2004h", "<paste-on>").replace("\x1b[?2004l", "<paste-off>")


@pytest.fixture
def pane(world: World) -> Iterator[Pane]:
    started = Pane(world)
    yield started
    if started.child.isalive():
        started.child.terminate(force=True)


def report(state: str, message: str | None = None, kind: str = "codex") -> list[str]:
    argv = ["pane", "report-agent", "w1:p2", "--source", "custom:sim-agent", "--agent", kind, "--state", state]
    return argv + (["--message", message] if message else []) + ["--seq", "<seq>"]


def callback(kind: str, body: str, target: str = "w1:p1", run: str = RUN, sender: str = "worker-a", reply: str = "w1:p2") -> list[str]:
    return ["agent", "prompt", target, HEADER.format(run=run, task="feature-a", sender=sender, kind=kind, reply=reply) + "\n" + body]


def envelope(kind: str, body: str = "", run: str = RUN, sender: str = "w1:p1") -> str:
    return HEADER.format(run=run, task="feature-a", sender=sender, kind=kind, reply="w1:p1") + ("\n" + body if body else "")


def branch_log(world: World) -> list[str]:
    return git(world.repo, "log", "--format=%H %s", "main..orch/feature-a").splitlines()


def scenario(world: World, toml: str) -> None:
    world.scenarios.parent.mkdir(parents=True, exist_ok=True)
    world.scenarios.write_text(toml)


# --- the default, well-behaved scenario ---------------------------------------------------------------------------


def test_default_scenario_commits_in_claim_runs_checks_and_sends_result(world: World, pane: Pane) -> None:
    pane.paste(world.packet())
    pane.until_prompt()
    pane.type("/exit")
    assert pane.exit_status() == 0

    [commit] = branch_log(world)
    sha = commit.split()[0]
    assert commit == f"{sha} feature-a: Add the greeting module."
    assert (world.workdir / "src/greet/sim-feature-a.txt").read_text() == "feature-a: Add the greeting module.\n"
    result = (
        f"Status: done\nCommits: {sha}\nChanged files: src/greet/sim-feature-a.txt\nChecks:\n"
        "- test -d src/greet && echo greet ok => exit 0\n  | greet ok\n"
        "- git status --short | wc -l => exit 0\n  | 0\n"
        "Residual risk: none known"
    )
    assert world.calls() == [
        report("idle"),
        report("working"),
        callback("update", "Starting feature-a: Add the greeting module."),
        callback("result", result),
        report("idle"),
    ]
    indented = "\n".join(f"    {line}" for line in result.splitlines())
    assert pane.transcript() == (
        "<paste-on>codex (herdr-sim scripted agent) - paste a delegation packet; /exit to quit\n"
        f"\u203a [Pasted: Delegation packet for task feature-a (run {RUN}) +54 lines]\n"
        f"• Read packet: task feature-a, run {RUN}, branch orch/feature-a, claim src/greet/**\n"
        "• Sending update:\n    Starting feature-a: Add the greeting module.\n• Sent update.\n"
        "• Wrote src/greet/sim-feature-a.txt\n"
        f"• Committed {sha[:7]} feature-a: Add the greeting module.\n"
        "• Running `test -d src/greet && echo greet ok`\n  => exit 0\n  | greet ok\n"
        "• Running `git status --short | wc -l`\n  => exit 0\n  | 0\n"
        f"• Sending result:\n{indented}\n• Sent result.\n"
        "• Turn complete.\n"
        "\u203a /exit\nBye.\n<paste-off>"
    )
    assert (Path(world.env["HERDR_SIM_HOME"]) / "agents" / "w1_p2.log").read_text().count("• Turn complete.") == 1


def attributed_packet(world: World) -> str:
    """The packet with orch's commit rule for a branch with siblings: commit own paths, end with the trailer."""
    rule = "- src/greet/**\n\nCommit your own files by naming them, and end every commit message with the trailer line `Orch-Task: feature-a`.\n"
    return world.packet().replace("- src/greet/**\n", rule, 1)


def sibling_once(world: World, hook: str, script: str) -> None:
    """A git hook of the shared repo that runs ``script`` the first time only: a sibling acting at that moment."""
    path = world.repo / ".git" / "hooks" / hook
    path.write_text(f'#!/bin/sh\ndone="$(git rev-parse --git-common-dir)/sibling-done"\n[ -e "$done" ] && exit 0\ntouch "$done"\n{script}\n')
    path.chmod(0o755)


def test_a_commit_is_named_by_git_commit_itself_when_a_sibling_moves_the_shared_branch_at_once(world: World, pane: Pane) -> None:
    # A sibling sharing the checkout commits right after this agent's commit (a post-commit hook is that moment, with
    # real git): HEAD read afterwards is the sibling's commit, which the agent must not claim as its own.
    sibling_once(world, "post-commit", "unset GIT_INDEX_FILE\necho sibling > sibling.txt && git add sibling.txt && git commit -q -m 'sibling: moved the branch' -- sibling.txt")
    pane.paste(attributed_packet(world))
    pane.until_prompt()

    sibling, own = branch_log(world)
    assert sibling.split(" ", 1)[1] == "sibling: moved the branch"
    sha = own.split()[0]
    assert own == f"{sha} feature-a: Add the greeting module."
    assert git(world.repo, "diff-tree", "--no-commit-id", "--name-only", "-r", sha).split() == ["src/greet/sim-feature-a.txt"]
    [result] = [call[3] for call in world.calls() if call[:2] == ["agent", "prompt"] and "kind=result" in call[3]]
    assert result.splitlines()[2:5] == [f"Commits: {sha}", "Changed files: src/greet/sim-feature-a.txt", "Checks:"]


def test_a_commit_a_sibling_commit_overtook_is_made_again(world: World, pane: Pane) -> None:
    # The sibling's commit lands while this agent's `git commit` is under way (its commit-msg hook is that moment, with
    # real git), so git refuses the ref update ("cannot lock ref 'HEAD': is at … but expected …"). A real agent runs
    # the commit again; before, the scripted one reported its work with no commit at all.
    sibling_once(world, "commit-msg", "git update-ref HEAD \"$(git commit-tree 'HEAD^{tree}' -p HEAD -m 'sibling: overtook')\"")
    pane.paste(world.packet())
    pane.until_prompt()

    own, sibling = branch_log(world)
    assert sibling.split(" ", 1)[1] == "sibling: overtook"
    sha = own.split()[0]
    assert own == f"{sha} feature-a: Add the greeting module."
    [result] = [call[3] for call in world.calls() if call[:2] == ["agent", "prompt"] and "kind=result" in call[3]]
    assert result.splitlines()[2:4] == [f"Commits: {sha}", "Changed files: src/greet/sim-feature-a.txt"]
    assert "git commit failed" not in pane.transcript()


def test_files_a_siblings_commit_unstaged_are_staged_again_and_committed(world: World) -> None:
    # A sibling's `git commit` reads the shared index before it locks it and writes it back whole, so a file this
    # agent staged in between is unstaged again, and `git commit -- PATHS` answers "pathspec … did not match any
    # file(s) known to git". A `git` first on PATH (real git underneath) leaves that index at the first commit.
    real = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True, check=True).stdout.strip()
    wrapper = world.tmp / "sibling-bin" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(
        f'#!/bin/sh\nif [ "$1" = commit ] && [ ! -e "{world.tmp}/unstaged" ]; then\n'
        f'  touch "{world.tmp}/unstaged"; "{real}" reset -q -- .\nfi\nexec "{real}" "$@"\n'
    )
    wrapper.chmod(0o755)
    world.env["PATH"] = f"{wrapper.parent}:{world.env['PATH']}"
    pane = Pane(world)
    try:
        pane.paste(attributed_packet(world))
        pane.until_prompt()
    finally:
        pane.child.terminate(force=True)

    assert (world.tmp / "unstaged").exists()
    [own] = branch_log(world)
    sha = own.split()[0]
    assert own == f"{sha} feature-a: Add the greeting module."
    assert git(world.repo, "diff-tree", "--no-commit-id", "--name-only", "-r", sha).split() == ["src/greet/sim-feature-a.txt"]
    assert "git commit failed" not in pane.transcript()


def test_default_follow_up_appends_commits_and_reports_again(world: World, pane: Pane) -> None:
    pane.paste(world.packet())
    pane.until_prompt()
    pane.paste(envelope("follow-up", "Also say goodbye."))
    pane.until_prompt()

    second, first = (line.split()[0] for line in branch_log(world))
    assert (world.workdir / "src/greet/sim-feature-a.txt").read_text() == (
        "feature-a: Add the greeting module.\nfollow-up: Also say goodbye.\n"
    )
    assert world.calls()[5:] == [
        report("working"),
        callback(
            "result",
            f"Status: done\nCommits: {first} {second}\nChanged files: src/greet/sim-feature-a.txt\nChecks:\n"
            "- test -d src/greet && echo greet ok => exit 0\n  | greet ok\n"
            "- git status --short | wc -l => exit 0\n  | 0\n"
            "Residual risk: none known",
        ),
        report("idle"),
    ]


# --- the prompt itself ------------------------------------------------------------------------------------------


def test_exit_and_chat_turns(world: World, pane: Pane) -> None:
    pane.type("hello there")
    pane.until_prompt()
    pane.type("/exit")
    assert pane.exit_status() == 0
    assert world.calls() == [report("idle"), report("working"), report("idle")]
    assert pane.transcript().endswith(
        "\u203a hello there\n• I only act on delegation packets and run-scoped [herdr-orchestration ...] messages.\n"
        "\u203a /exit\nBye.\n<paste-off>"
    )


def test_ctrl_c_at_the_idle_prompt_exits_cleanly(world: World, pane: Pane) -> None:
    pane.child.sendcontrol("c")
    assert pane.exit_status() == 0
    assert pane.transcript().endswith("\u203a ^C\nBye.\n<paste-off>")


def test_restarted_agent_reports_with_a_higher_seq(world: World, pane: Pane) -> None:
    pane.type("/exit")
    assert pane.exit_status() == 0
    again = Pane(world)
    again.type("/exit")
    assert again.exit_status() == 0
    assert world.calls() == [report("idle"), report("idle")]  # calls() checks the seqs increase


def test_unreadable_packet_is_said_on_screen(world: World, pane: Pane) -> None:
    pane.paste(world.packet().replace("Branch: orch/feature-a\n", ""))
    pane.until_prompt()
    assert world.calls() == [report("idle"), report("working"), report("idle")]
    assert pane.transcript().endswith("• Cannot read this packet: missing header: Branch\n\u203a ")


def test_missing_working_directory_blocks(world: World, pane: Pane) -> None:
    pane.paste(world.packet(workdir=world.tmp / "gone"))
    pane.until_prompt()
    message = f"Working directory {world.tmp / 'gone'} does not exist."
    assert world.calls() == [report("idle"), report("working"), callback("blocked", message), report("idle")]


# --- scripted capabilities --------------------------------------------------------------------------------------


def test_scripted_edits_inside_and_outside_claim_with_a_command(world: World, pane: Pane) -> None:
    scenario(
        world,
        """
[[task.feature-a]]
do = "update"
message = "Working on {task} in run {run}"

[[task.feature-a]]
do = "write"
path = "src/greet/hello.py"
content = "print('hello')\\n"

[[task.feature-a]]
do = "write"
path = "README.md"
content = "sneaky edit\\n"
append = true

[[task.feature-a]]
do = "run"
command = "echo ran > run.txt && echo done-running"

[[task.feature-a]]
do = "commit"
message = "greet: hello"

[[task.feature-a]]
do = "result"
checks = "run"
residual_risk = "README touched"
""",
    )
    pane.paste(world.packet())
    pane.until_prompt()
    [commit] = branch_log(world)
    sha = commit.split()[0]
    assert commit == f"{sha} greet: hello"
    assert (world.workdir / "README.md").read_text() == "hello\nsneaky edit\n"
    assert world.calls() == [
        report("idle"),
        report("working"),
        callback("update", f"Working on feature-a in run {RUN}"),
        callback(
            "result",
            f"Status: done\nCommits: {sha}\nChanged files: README.md, run.txt, src/greet/hello.py\nChecks:\n"
            "- test -d src/greet && echo greet ok => exit 0\n  | greet ok\n"
            "- git status --short | wc -l => exit 0\n  | 0\n"
            "Residual risk: README touched",
        ),
        report("idle"),
    ]
    assert pane.transcript().split("• Wrote src/greet/hello.py\n", 1)[1].split("• Sending result:")[0] == (
        "• Appended to README.md\n"
        "• Running `echo ran > run.txt && echo done-running`\n  => exit 0\n  | done-running\n"
        f"• Committed {sha[:7]} greet: hello\n"
        "• Running `test -d src/greet && echo greet ok`\n  => exit 0\n  | greet ok\n"
        "• Running `git status --short | wc -l`\n  => exit 0\n  | 0\n"
    )


def test_question_ends_turn_and_answer_continues(world: World, pane: Pane) -> None:
    scenario(
        world,
        """
[[task.feature-a]]
do = "question"
message = "Which greeting?"

[[task.feature-a]]
do = "write"
path = "src/greet/answer.txt"

[[task.feature-a]]
do = "result"
checks = "claimed"
""",
    )
    pane.paste(world.packet())
    pane.until_prompt()
    assert world.calls()[-2:] == [callback("question", "Which greeting?"), report("idle")]
    pane.paste(envelope("answer", "Say hi.", run="r-old"))
    pane.until_prompt()
    pane.paste(envelope("answer", "Say hi.", sender="w9:p9"))
    pane.until_prompt()
    pane.paste(envelope("answer", "Say \"hi\" for $5."))
    pane.until_prompt()

    assert (world.workdir / "src/greet/answer.txt").read_text() == 'Say "hi" for $5.\n'
    assert world.calls()[4:] == [
        report("working"),
        report("idle"),
        report("working"),
        report("idle"),
        report("working"),
        callback(
            "result",
            "Status: done\nCommits: none\nChanged files: src/greet/answer.txt\nChecks:\n"
            "- test -d src/greet && echo greet ok => exit 0\n- git status --short | wc -l => exit 0\n"
            "Residual risk: none known",
        ),
        report("idle"),
    ]
    assert pane.transcript().split("• Waiting for an answer.\n", 1)[1] == (
        "\u203a [Pasted: [herdr-orchestration run=r-old task=feature-a from=w1:p1 kind=answer reply-to=w1:p1] +1 lines]\n"
        f"• Ignoring answer for run r-old task feature-a: my task is feature-a in run {RUN}.\n"
        f"\u203a [Pasted: [herdr-orchestration run={RUN} task=feature-a from=w9:p9 kind=answer reply-to=w1:p1] +1 lines]\n"
        f"• Ignoring answer for run {RUN} task feature-a: sender w9:p9 is not my controller w1:p1.\n"
        f"\u203a [Pasted: [herdr-orchestration run={RUN} task=feature-a from=w1:p1 kind=answer reply-to=w1:p1] +1 lines]\n"
        '• Answer received: Say "hi" for $5.\n'
        "• Wrote src/greet/answer.txt\n"
        "• Sending result:\n"
        "    Status: done\n    Commits: none\n    Changed files: src/greet/answer.txt\n    Checks:\n"
        "    - test -d src/greet && echo greet ok => exit 0\n    - git status --short | wc -l => exit 0\n"
        "    Residual risk: none known\n"
        "• Sent result.\n• Turn complete.\n\u203a "
    )


def test_blocked_ends_the_turn_idle_and_stop_returns_to_idle(world: World, pane: Pane) -> None:
    scenario(world, '[[task.feature-a]]\ndo = "blocked"\nmessage = "Need the API token."\n\n[[task.feature-a]]\ndo = "result"\n')
    pane.paste(world.packet())
    pane.until_prompt()
    pane.paste(envelope("stop", "Abandon it."))
    pane.until_prompt()
    assert world.calls() == [
        report("idle"),
        report("working"),
        callback("blocked", "Need the API token."),
        report("idle"),  # its turn is over, as a real agent's after its callback: no dialog on screen
        report("working"),
        report("idle"),
    ]
    assert pane.child.isalive()
    assert pane.transcript().endswith("• Stopped by the controller.\n\u203a ")


@pytest.mark.parametrize("how", ["ctrl-c", "stop"])
def test_stall_stays_working_until_interrupted(world: World, pane: Pane, how: str) -> None:
    scenario(world, '[[task.feature-a]]\ndo = "update"\nmessage = "on it"\n\n[[task.feature-a]]\ndo = "stall"\n\n[[task.feature-a]]\ndo = "result"\n')
    pane.paste(world.packet())
    pane.wait_for("• Sent update.\r\n")
    pane.paste("are you there?")  # queued for after the turn; no output while stalled
    pane.child.expect_exact("are you there?")
    with pytest.raises(pexpect.TIMEOUT):
        pane.child.expect_exact("\u203a ", timeout=0.5)
    assert world.calls() == [report("idle"), report("working"), callback("update", "on it")]
    if how == "ctrl-c":
        pane.child.sendcontrol("c")
        pane.wait_for("• Interrupted.")
    else:
        pane.paste(envelope("stop"))
        pane.wait_for("• Stopped by the controller.")
    pane.until_prompt()
    pane.until_prompt()  # the queued chat message gets its own turn
    assert world.calls()[3:] == [report("idle"), report("working"), report("idle")]


def test_crash_exits_non_zero_mid_task(world: World, pane: Pane) -> None:
    scenario(world, '[[task.feature-a]]\ndo = "write"\npath = "src/greet/x"\ncontent = "x"\n\n[[task.feature-a]]\ndo = "crash"\nexit_code = 3\n')
    pane.paste(world.packet())
    assert pane.exit_status() == 3
    assert world.calls() == [report("idle"), report("working")]
    assert pane.transcript().endswith("• Wrote src/greet/x\nError: internal error: scripted crash\n<paste-off>")


def test_claimed_checks_are_not_run(world: World, pane: Pane) -> None:
    scenario(world, '[[task.feature-a]]\ndo = "result"\nchecks = "claimed"\nchanged_files = ["src/greet/a.py"]\ncommits = ["deadbeef"]\n')
    pane.paste(world.packet())
    pane.until_prompt()
    assert world.calls()[2] == callback(
        "result",
        "Status: done\nCommits: deadbeef\nChanged files: src/greet/a.py\nChecks:\n"
        "- test -d src/greet && echo greet ok => exit 0\n- git status --short | wc -l => exit 0\n"
        "Residual risk: none known",
    )
    assert pane.transcript().split(" +54 lines]\n", 1)[1] == (
        f"• Read packet: task feature-a, run {RUN}, branch orch/feature-a, claim src/greet/**\n"
        "• Sending result:\n    Status: done\n    Commits: deadbeef\n    Changed files: src/greet/a.py\n    Checks:\n"
        "    - test -d src/greet && echo greet ok => exit 0\n    - git status --short | wc -l => exit 0\n"
        "    Residual risk: none known\n• Sent result.\n• Turn complete.\n\u203a "
    )


def test_forged_run_id_and_sender(world: World, pane: Pane) -> None:
    scenario(
        world,
        '[[task.feature-a]]\ndo = "send"\nkind = "update"\nmessage = "old"\nrun = "r-stale"\n\n'
        '[[task.feature-a]]\ndo = "send"\nkind = "result"\nmessage = "fake"\nfrom = "mallory"\n',
    )
    pane.paste(world.packet())
    pane.until_prompt()
    assert world.calls()[2:4] == [callback("update", "old", run="r-stale"), callback("result", "fake", sender="mallory")]


def test_failed_callback_is_shown_verbatim_and_not_retried(world: World, pane: Pane) -> None:
    scenario(world, '[[task.feature-a]]\ndo = "update"\nmessage = "hi"\n')
    pane.paste(world.packet(prefix="herdr agent prompt gone"))
    pane.until_prompt()
    assert world.calls() == [report("idle"), report("working"), callback("update", "hi", target="gone"), report("idle")]
    assert pane.transcript().endswith(
        "• Send of update failed with exit 1; not retrying:\n"
        '{"id":"cli:agent:prompt","error":{"code":"agent_not_found","message":"agent target gone not found"}}\n'
        "• Turn complete.\n\u203a "
    )


def test_long_check_output_goes_to_a_markdown_report(world: World) -> None:
    scenario(world, '[[task.feature-a]]\ndo = "verify"\n\n[[task.feature-a]]\ndo = "run"\ncommand = "true"\n\n[[task.feature-a]]\ndo = "result"\n')
    world.env["HERDR_SIM_SCENARIOS"] = str(world.scenarios)
    long_packet = world.packet().replace("- `git status --short | wc -l`", "- `seq 1 5`")
    again = Pane(world)
    again.paste(long_packet)
    again.until_prompt()
    path = world.tmp / "tmp" / "herdr-sim-reports" / RUN / "feature-a.md"
    assert world.calls()[-2] == callback(
        "result",
        "Status: done\nCommits: none\nChanged files: none\nChecks:\n"
        "- test -d src/greet && echo greet ok => exit 1\n"
        "- seq 1 5 => exit 0\n  | 3\n  | 4\n  | 5\n"
        f"Report: {path}\nResidual risk: none known",
    )
    assert path.read_text() == (
        f"# Checks for task feature-a (run {RUN})\n\n"
        "## `test -d src/greet && echo greet ok` => exit 1\n\n```text\n\n```\n\n"
        "## `seq 1 5` => exit 0\n\n```text\n1\n2\n3\n4\n5\n```\n"
    )
    again.child.terminate(force=True)


def test_scripted_follow_up_uses_its_own_steps(world: World, pane: Pane) -> None:
    scenario(
        world,
        '[[task.feature-a]]\ndo = "update"\nmessage = "first"\n\n'
        '[[follow-up.feature-a]]\ndo = "write"\npath = "src/greet/f.txt"\ncontent = "{answer}"\n\n'
        '[[follow-up.feature-a]]\ndo = "update"\nmessage = "followed: {answer}"\n',
    )
    pane.paste(world.packet())
    pane.until_prompt()
    pane.paste(envelope("follow-up", "rename it"))
    pane.until_prompt()
    assert (world.workdir / "src/greet/f.txt").read_text() == "rename it"
    assert world.calls()[4:] == [report("working"), callback("update", "followed: rename it"), report("idle")]


def test_agent_kind_is_reported(world: World) -> None:
    claude = Pane(world, kind="claude")
    claude.type("/exit")
    assert claude.exit_status() == 0
    assert world.calls() == [report("idle", kind="claude")]


def test_the_scripted_pi_exits_with_quit_and_takes_exit_as_a_prompt_like_the_real_one(world: World) -> None:
    """pi 0.73.1 (../shared/real-agents pi-11..13): `/exit` is no command of pi's, it goes to the model; `/quit` ends pi."""
    pi = Pane(world, kind="pi")
    assert "ctrl+c/ctrl+d clear/exit" in pi.transcript()  # its ready sign, as orch's quirk table reads it
    pi.type("/exit")
    pi.wait_for("I only act on delegation packets")
    pi.until_prompt()
    pi.type("/quit")
    assert pi.exit_status() == 0


REPEAT = "Your last message did not reach the controller on its own. Send your last message again, unchanged."


def test_asked_to_send_its_last_message_again_it_resends_it_unchanged_and_still_waits(world: World, pane: Pane) -> None:
    """What a real agent does with orch's request after a possible merge: the same callback again, nothing else."""
    scenario(world, '[[task.feature-a]]\ndo = "blocked"\nmessage = "Need the API token."\n\n'
                    '[[task.feature-a]]\ndo = "write"\npath = "src/greet/token.txt"\n\n[[task.feature-a]]\ndo = "result"\nchecks = "claimed"\n')
    pane.paste(world.packet())
    pane.until_prompt()
    pane.paste(envelope("follow-up", REPEAT))
    pane.until_prompt()
    assert world.calls()[1:] == [
        report("working"), callback("blocked", "Need the API token."), report("idle"),
        report("working"), callback("blocked", "Need the API token."), report("idle"),
    ]  # fmt: skip
    assert pane.transcript().endswith("• Asked to send my last message again.\n• Sending blocked:\n    Need the API token.\n"
                                      "• Sent blocked.\n• Blocked; waiting for the controller.\n\u203a ")
    # Still waiting: the answer continues the scenario where the block stopped it, and the result goes out once.
    pane.paste(envelope("answer", "Use the staging token."))
    pane.until_prompt()
    assert (world.workdir / "src/greet/token.txt").read_text() == "Use the staging token.\n"
    assert [call[3].split("\n")[0] for call in world.calls() if call[:2] == ["agent", "prompt"]][-1].endswith("kind=result reply-to=w1:p2]")


def test_asked_to_send_its_last_message_again_before_sending_any_it_says_so(world: World, pane: Pane) -> None:
    scenario(world, '[[task.feature-a]]\ndo = "write"\npath = "src/greet/a.txt"\n')
    pane.paste(world.packet())
    pane.until_prompt()
    pane.paste(envelope("follow-up", REPEAT))
    pane.until_prompt()
    assert [c for c in world.calls() if c[:2] == ["agent", "prompt"]] == []
    assert pane.transcript().endswith("• Nothing to send again: I have sent no message yet.\n\u203a ")
