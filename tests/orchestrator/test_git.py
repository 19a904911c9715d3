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
