"""orchestrator.git's own process discipline (what every git call of orch shares)."""

import os
import signal

from orchestrator import git


def test_a_git_child_never_sees_the_terminal_signals_of_orchs_group() -> None:
    # As herdr's: a Ctrl-C to orch's process group must not kill git halfway (a `rev-parse --verify` killed so once
    # answered "base main names no commit" and failed a worker for good; a `worktree add` would be left half made).
    # The alias's shell reads its parent's status: git's own.
    status = git.run_git(["-c", "alias.probe=!cat /proc/$PPID/status", "probe"]).stdout.splitlines()
    blocked = int(next(line for line in status if line.startswith("SigBlk:")).split()[1], 16)
    assert [bool(blocked & (1 << (sig - 1))) for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP, signal.SIGHUP)] == [True] * 4
    assert os.getsid(0) != int(next(line for line in status if line.startswith("NSsid:")).split()[1])


def test_a_failed_git_call_is_one_readable_line_even_when_an_argument_spans_lines(git_repo_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    repo = git_repo_factory(tmp_path / "repo")

    try:
        git.run_git(["merge", "--no-ff", "-m", "Merge feat/x (x)\n\norch run r1", "no-such-rev"], cwd=repo.path)
    except git.GitError as failed:
        message = failed.message
    else:
        raise AssertionError("the merge of a missing revision succeeded")

    # The merge message used to be printed raw: its blank line split the error into `orch:` lines of argv fragments.
    assert message == f"git -C {repo.path} merge --no-ff -m 'Merge feat/x (x)\\n\\norch run r1' no-such-rev failed: merge: no-such-rev - not something we can merge"
