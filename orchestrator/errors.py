"""The orch error tree and the stable process exit codes; every user-facing failure is one of these."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Process exit codes; documented in the README and stable across releases."""

    OK = 0
    FAILURE = 1
    USAGE = 2
    HERDR_UNAVAILABLE = 3
    INTERNAL = 4
    INTERRUPTED = 130


class OrchError(Exception):
    """A failure with one user-facing sentence; ``hint`` says what to do about it."""

    exit_code: ExitCode = ExitCode.FAILURE

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class ConfigError(OrchError):
    """A plan, policy overlay or setting is invalid; nothing was changed."""
