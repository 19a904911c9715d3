"""Errors raised by the registry package; standard library only, so machine.py can use them too."""

from __future__ import annotations


class RegistryError(Exception):
    """Root of every registry error; str(e) is one line a person can act on."""


class IllegalTransition(RegistryError):
    """A state change the worker state machine does not allow; raised before the ledger is touched."""

    def __init__(self, current: str, new: str, allowed: tuple[str, ...]) -> None:
        self.current = current
        self.new = new
        self.allowed = allowed
        listed = ", ".join(allowed) if allowed else "nothing (terminal state)"
        super().__init__(f"illegal worker transition {current} -> {new}; from {current} only: {listed}")


class StaleState(RegistryError):
    """A compare-and-set transition lost: the worker was no longer in the expected state."""

    def __init__(self, run_id: str, task_label: str, expected: str, actual: str) -> None:
        self.run_id = run_id
        self.task_label = task_label
        self.expected = expected
        self.actual = actual
        super().__init__(f"worker {task_label} of run {run_id} is {actual}, not {expected}")


class RunNotFound(RegistryError):
    """No run with this id in the ledger."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"no run {run_id} in the ledger")


class WorkerNotFound(RegistryError):
    """No worker with this task label (or name) in the run."""

    def __init__(self, run_id: str, what: str) -> None:
        self.run_id = run_id
        self.what = what
        super().__init__(f"no worker {what} in run {run_id}")


class DuplicateWorker(RegistryError):
    """A worker with this task label or name already exists in the run."""


class DuplicateRun(RegistryError):
    """A run with this id already exists."""


class EffectNotFound(RegistryError):
    """No side effect with this id."""

    def __init__(self, effect_id: int) -> None:
        self.effect_id = effect_id
        super().__init__(f"no effect #{effect_id} in the ledger")


class EffectConflict(RegistryError):
    """An effect key was intended again for a different action (kind, task or request differ)."""


class EffectSettled(RegistryError):
    """An effect already left the intended state, so it cannot be confirmed, failed or abandoned again."""

    def __init__(self, effect_id: int, status: str, wanted: str) -> None:
        self.effect_id = effect_id
        self.status = status
        self.wanted = wanted
        super().__init__(f"effect #{effect_id} is already {status}; cannot mark it {wanted}")


class InboxNotFound(RegistryError):
    """No inbox message with this id."""

    def __init__(self, inbox_id: int) -> None:
        self.inbox_id = inbox_id
        super().__init__(f"no inbox message #{inbox_id} in the ledger")


class SchemaTooNew(RegistryError):
    """The ledger file was written by a newer orch than this one."""


class LedgerMissing(RegistryError):
    """The ledger file does not exist and this open may not create it (a command that only reads or acts on runs)."""

    def __init__(self, path: object) -> None:
        super().__init__(f"no ledger at {path}")
        self.path = path
