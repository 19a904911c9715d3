"""Children that a test interrupts with SIGINT start with SIGINT's default action, even when the suite runs with it ignored.

A non-interactive shell's background job (some CI runners start test suites so) inherits SIGINT ignored, and
Python then installs no KeyboardInterrupt handler: the child would never see the test's Ctrl-C.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

_RESET_AND_EXEC = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])"


def interruptible(argv: Sequence[str]) -> list[str]:
    """``argv`` run through a one-line Python that restores SIGINT's default, then execs it (nothing else changes)."""
    return [sys.executable, "-c", _RESET_AND_EXEC, *argv]
