"""The orch error tree and the stable process exit codes; every user-facing failure is one of these."""

from __future__ import annotations

import enum
import os
import shlex
from dataclasses import dataclass


class ExitCode(enum.IntEnum):
    """Process exit codes; documented in the README and stable across releases."""

    OK = 0
    FAILURE = 1
    USAGE = 2
    HERDR_UNAVAILABLE = 3
    INTERNAL = 4
    # The run's verdict (`orch report`, `orch run`): PASS is OK; PARTIAL and FAIL are distinct so scripts can tell them apart.
    VERDICT_PARTIAL = 10
    VERDICT_FAIL = 11
    INTERRUPTED = 130


class OrchError(Exception):
    """A failure with one user-facing sentence; ``hint`` says what to do about it."""

    exit_code: ExitCode = ExitCode.FAILURE
    # What the agent controller does next, as door commands print it (`next[]` of a failure under --json), if anything.
    next_steps: tuple[dict[str, object], ...] = ()

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class ConfigError(OrchError):
    """A plan, policy overlay or setting is invalid; nothing was changed."""


# --- the herdr error family (raised only by orchestrator.herdr) ---


@dataclass(frozen=True)
class HerdrCall:
    """One finished (or abandoned) herdr process: what we ran and everything it said."""

    argv: tuple[str, ...]
    returncode: int | None  # None when the process never finished: missing binary or our own timeout
    stdout: str
    stderr: str
    seconds: float

    @property
    def command(self) -> str:
        """The command path for messages, e.g. ``herdr agent prompt`` (never the free text that follows)."""
        argv = list(self.argv)
        via: list[str] = []
        if argv and os.path.basename(argv[0]) == "ssh" and "--" in argv:
            # herdr on another host over ssh (orchestrator.remote): its target, then the remote command's words.
            split = argv.index("--")
            via = ["ssh", argv[split - 1]]
            argv = shlex.split(argv[split + 1]) if split + 1 < len(argv) else []
        words = [*via, os.path.basename(argv[0])] if argv else [*via, "herdr"]
        rest = argv[1:]
        if rest[:1] == ["--session"]:
            rest = rest[2:]
        elif rest[:1] == ["--machine"] and len(rest) > 1:
            words += rest[:2]  # which saved machine is part of what was called
            rest = rest[2:]
        for word in rest[:2]:
            words.append(word)
            if word.startswith("-"):
                break
        return " ".join(words)

    def describe(self) -> str:
        """A multi-line rendering for logs: argv, exit code, time, stdout and stderr."""
        lines = [f"argv: {shlex.join(self.argv)}", f"exit: {self.returncode}", f"seconds: {self.seconds:.3f}"]
        for name, text in (("stdout", self.stdout), ("stderr", self.stderr)):
            lines.append(f"{name}:" if text else f"{name}: (empty)")
            lines.extend(f"  {line}" for line in text.splitlines())
        return "\n".join(lines)


def one_line(text: str) -> str:
    """Collapse herdr's (possibly multi-line, e.g. git stderr) text into one line."""
    return " / ".join(line.strip() for line in text.strip().splitlines() if line.strip())


class HerdrFailure(OrchError):
    """A herdr call failed; ``call`` holds argv, exit code, stdout and stderr, ``code`` herdr's error code if any."""

    def __init__(
        self,
        message: str,
        *,
        call: HerdrCall | None = None,
        code: str | None = None,
        herdr_message: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.call = call
        self.code = code
        self.herdr_message = herdr_message


class HerdrError(HerdrFailure):
    """herdr answered this call with a failure about what it was asked (or the call itself went wrong)."""


class HerdrUnavailable(HerdrFailure):
    """The herdr server is not running, refuses connections or does not answer: the whole run waits for herdr, no
    worker fails for it.

    Deliberately not a HerdrError: a phase's ``except HerdrError`` means "herdr said no about this pane, agent or
    worktree", and an outage must never be read as that (a worker failed for good, an agent taken as gone, a screen
    taken as unreadable). It reaches `orch run`, which stops the run interrupted until herdr is back (orchestrator.run).
    """

    exit_code = ExitCode.HERDR_UNAVAILABLE


class HostUnreachable(HerdrUnavailable):
    """ssh to another host failed (exit 255): the host is down or refuses us, or the link dropped mid-call, so a
    mutation's outcome is unknown and is settled by read-back, never retried blind (orchestrator.remote)."""


class HerdrMissing(HerdrError):
    """The herdr binary could not be executed (not installed, not on PATH, not executable)."""

    exit_code = ExitCode.HERDR_UNAVAILABLE


class HerdrTimeout(HerdrUnavailable):
    """herdr did not finish within our own wall-clock limit; the effect of a mutating call is unknown.

    An outage, like a stopped server: a hung herdr answers no phase (a check-in, a screen read, a retire), and taking
    its silence as news about one worker would fail it for nothing. A mutating call's unknown outcome is settled by
    read-back first (``Engine.once``); only what still gets no answer stops the run."""


class HerdrCallLost(HerdrTimeout):
    """The herdr process died of a signal before answering; like a timeout, the effect of a mutating call is unknown
    (reads are tried again first: a killed client says nothing about herdr itself)."""


class HerdrProtocolError(HerdrError):
    """herdr answered with something we cannot parse or did not expect (wrong shape, wrong type, protocol mismatch)."""

    exit_code = ExitCode.INTERNAL


class HerdrUsageError(HerdrError):
    """herdr rejected the argv orch built (exit 2, or a Rust ``Error: Custom``): a bug in orch, never retried."""

    exit_code = ExitCode.INTERNAL


class HerdrCommandError(HerdrError):
    """herdr refused or failed a well-formed command with a JSON error body; ``code`` says why."""


class HerdrNotFound(HerdrCommandError):
    """The workspace, tab, pane, agent or worktree named does not exist (or is not an agent)."""


class HerdrTargetAmbiguous(HerdrCommandError):
    """An agent name matched more than one agent."""


class HerdrAgentNotReady(HerdrCommandError):
    """The agent cannot take input: not a known kind, launch pending, or no longer the foreground process."""


class HerdrAgentBlocked(HerdrCommandError):
    """Not sent: the agent is at a dialog (approval, question, trust) and herdr 0.8.2+ wrote nothing to it."""


class HerdrAgentNotRunning(HerdrCommandError):
    """The agent being waited on went away (pane closed, exited, moved or replaced)."""


class HerdrPaneBusy(HerdrCommandError):
    """``agent start`` refused: the pane is not an idle shell; nothing was typed."""


class HerdrNameTaken(HerdrCommandError):
    """The agent name is already used by another agent."""


class HerdrWaitExpired(HerdrCommandError):
    """herdr's own wait timed out: a check-in, not a verdict; read state and decide."""


class HerdrPromptStalled(HerdrWaitExpired):
    """``agent prompt --wait`` saw no state change within herdr's 5 s activity gate; the prompt was submitted."""


class HerdrConfirmationRequired(HerdrCommandError):
    """Closing would close a worktree group; herdr closed nothing."""


class HerdrGroupCloseRequired(HerdrConfirmationRequired):
    """herdr 0.9+: closing a primary workspace with open worktree workspaces needs ``--group``; nothing was closed."""


class HerdrWorktreeCreateFailed(HerdrCommandError):
    """git refused to create the worktree (existing path or branch, ...); the message is git's stderr."""


class HerdrWorktreeBusy(HerdrCommandError):
    """Another create or remove is in flight for the same checkout path."""


class HerdrDirtyWorktree(HerdrCommandError):
    """``worktree remove`` refused a dirty checkout without ``--force``; nothing was removed."""


# herdr error code -> exception class; codes not listed become a plain HerdrCommandError (CONTRACT.md §11).
HERDR_ERROR_BY_CODE: dict[str, type[HerdrFailure]] = {
    "workspace_not_found": HerdrNotFound,
    "tab_not_found": HerdrNotFound,
    "pane_not_found": HerdrNotFound,
    "target_pane_not_found": HerdrNotFound,
    "agent_not_found": HerdrNotFound,
    "agent_pane_not_found": HerdrNotFound,
    "agent_name_not_found": HerdrNotFound,
    "worktree_not_found": HerdrNotFound,
    "agent_target_ambiguous": HerdrTargetAmbiguous,
    "agent_not_ready": HerdrAgentNotReady,
    "agent_launch_pending": HerdrAgentNotReady,
    "agent_not_running": HerdrAgentNotRunning,
    "agent_pane_busy": HerdrPaneBusy,
    "agent_name_taken": HerdrNameTaken,
    "timeout": HerdrWaitExpired,
    "agent_prompt_stalled": HerdrPromptStalled,
    "confirmation_required": HerdrConfirmationRequired,
    "worktree_create_failed": HerdrWorktreeCreateFailed,
    "worktree_operation_in_progress": HerdrWorktreeBusy,
    "dirty_worktree_requires_force": HerdrDirtyWorktree,
    "server_unavailable": HerdrUnavailable,
    "protocol_mismatch": HerdrProtocolError,
    # herdr 0.8.x (../herdr-0.8.2/DELTA.md rows 2, 4, 6): the no-server case became a JSON error, a prompt to an agent
    # at a dialog is refused, and agent_not_ready also means "blocked during startup".
    "server_not_running": HerdrUnavailable,
    "agent_blocked": HerdrAgentBlocked,
    # herdr 0.9 (../herdr-0.9.1/DELTA.md row 8).
    "workspace_group_close_required": HerdrGroupCloseRequired,
}


class StorageError(OrchError):
    """The ledger or a run's files could not be read or written (disk full, read-only, locked, damaged); nothing half-done."""


# SQLite's error names (sqlite3.Error.sqlite_errorname, prefix before any `_EXTENDED` part) -> what it means, what to do.
_SQLITE_WORDS: dict[str, tuple[str, str]] = {
    "SQLITE_FULL": ("the disk is full", "free space on the disk that holds {home}, then run the command again"),
    "SQLITE_READONLY": ("it is read-only", "make {home} and the ledger in it writable for you (or point ORCH_HOME at a writable folder), then run the command again"),
    "SQLITE_PERM": ("permission denied", "make {home} and the ledger in it writable for you (or point ORCH_HOME at a writable folder), then run the command again"),
    "SQLITE_CANTOPEN": ("it cannot be opened", "check that {home} is a folder you can write, then run the command again"),
    "SQLITE_BUSY": ("another process holds it locked", "another program has the ledger open in a long write (an `sqlite3` shell, a backup tool?): close it, then run the command again"),
    "SQLITE_LOCKED": ("another process holds it locked", "another program has the ledger open in a long write (an `sqlite3` shell, a backup tool?): close it, then run the command again"),
    "SQLITE_CORRUPT": ("the file is damaged", "orch never rewrites a damaged ledger: restore it from a backup (`sqlite3 FILE .recover` may save what it holds), or move {home} aside to start afresh"),
    "SQLITE_NOTADB": ("the file is not a ledger (not an SQLite database)", "orch never rewrites it: put the real ledger back, or move {home} aside to start afresh"),
    "SQLITE_IOERR": ("the disk reported an I/O error", "check the disk that holds {home} (full? removed? failing?), then run the command again"),
}
# OS errors of a file orch writes or reads under ORCH_HOME (a plan snapshot, a packet, a report, the driver lock).
_OS_WORDS: dict[int, str] = {
    28: "free space on that disk, then run the command again",  # ENOSPC
    122: "free space (your disk quota is used up), then run the command again",  # EDQUOT
    30: "that file system is read-only: point ORCH_HOME at a writable folder, then run the command again",  # EROFS
    13: "make it writable for you (or point ORCH_HOME at a writable folder), then run the command again",  # EACCES
    1: "make it writable for you (or point ORCH_HOME at a writable folder), then run the command again",  # EPERM
}


def storage_error(exc: BaseException, home: str = "$ORCH_HOME") -> StorageError | None:
    """One line with a hint for a storage failure (an sqlite3 error, or an OSError on a named file with a disk-ish errno); None otherwise."""
    name = getattr(exc, "sqlite_errorname", None)
    if isinstance(name, str):
        found = next((words for prefix, words in _SQLITE_WORDS.items() if name == prefix or name.startswith(prefix + "_")), None)
        what, hint = found or ("it could not be used", "check {home} and the ledger in it, then run the command again")
        return StorageError(f"the ledger in {home} cannot be used: {what} (SQLite: {exc})", hint=hint.format(home=home))
    if isinstance(exc, OSError) and exc.filename is not None and exc.errno in _OS_WORDS:
        return StorageError(f"cannot write {exc.filename}: {exc.strerror or exc}", hint=_OS_WORDS[exc.errno])
    return None
