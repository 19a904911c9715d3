"""Child processes that outlive an interrupt: how orch runs herdr (orchestrator.herdr) and git (orchestrator.git)."""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import Any

# What a terminal sends to its whole foreground process group (Ctrl-C, Ctrl-\, Ctrl-Z, hang-up).
GROUP_SIGNALS = {signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP, signal.SIGHUP}


def run_child(argv: Sequence[str], *, env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """``subprocess.run`` of an argv list: text (UTF-8, errors replaced), stdin closed, output captured, a timeout.

    The child runs in a session of its own, so a terminal's Ctrl-C (sent to the whole foreground process group)
    never reaches herdr or git in the middle of a call; and an interrupt of orch itself waits for the call to finish
    (``subprocess.run`` would kill the child on KeyboardInterrupt), so orch stops between calls, never inside one.
    """

    def call() -> subprocess.CompletedProcess[str]:
        # The child joins a session of its own only once it runs (setsid between fork and exec): a terminal's signal
        # to orch's process group in that instant would still reach it and kill the call before herdr ever ran.
        # Blocked in the spawning thread, those signals stay blocked in the child (and go to orch's other threads).
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, GROUP_SIGNALS)
        try:
            return subprocess.run(
                list(argv),
                env=dict(env),
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                encoding="utf-8",
                errors="replace",
                check=False,
                start_new_session=True,
            )
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    if threading.current_thread() is not threading.main_thread():
        return call()  # signals interrupt only the main thread
    box: dict[str, Any] = {}
    finished = threading.Event()  # not Thread.join: an interrupted join can report a live thread as finished

    def work() -> None:
        try:
            box["proc"] = call()
        except BaseException as exc:  # handed back to the caller below, as subprocess.run would raise it
            box["error"] = exc
        finally:
            finished.set()

    worker = threading.Thread(target=work, name="child-call", daemon=True)
    interrupted: BaseException | None = None
    while not finished.is_set():
        try:
            if worker.ident is None:
                worker.start()
            finished.wait(1.0)
        except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: let the call finish, then stop
            interrupted = exc
    if interrupted is not None:
        raise interrupted
    if "error" in box:
        raise box["error"]
    proc: subprocess.CompletedProcess[str] = box["proc"]
    return proc
