"""Possible merges: a kept-aside prompt holding several headers, whose named live workers are asked, one at a time, to repeat their last message."""

from __future__ import annotations

from dataclasses import dataclass

from packets import WORKER_KINDS, Header, headers_in
from registry import Effect, InboxVerdict, Ledger, Run, Worker
from registry.machine import AT_WORK

# A worker is asked to repeat at most this often in a run: a body that forges headers cannot keep others busy for ever.
REPEAT_LIMIT = 5
REPEAT_REQUEST = (
    "Your last message did not reach the controller on its own: it arrived in one prompt with another worker's message, "
    "so neither was read. Send your last message again, unchanged, with the callback command from your packet, "
    "then go on as after sending it (wait for the answer to a question or block; end your turn after a result)."
)


@dataclass(frozen=True, kw_only=True)
class PossibleMerge:
    """A kept-aside message holding more than one header, and the registered workers its headers name, in order."""

    inbox_id: int
    tasks: tuple[str, ...]
    again_of: int | None = None  # the same text as this earlier possible merge: the sender's own, asked nothing


def repeat_prefix(task: str, inbox_id: int) -> str:
    """The effect key of the request to ``task`` for merge ``inbox_id``, up to the inbox mark it was sent after."""
    return f"{task}:repeat:{inbox_id}:after:"


def repeat_key(task: str, inbox_id: int, high_water: int) -> str:
    """The effect key: a reply is a message recorded after ``high_water`` (the newest inbox id when it was sent)."""
    return f"{repeat_prefix(task, inbox_id)}{high_water}"


def _names(run: Run, worker: Worker, header: Header) -> bool:
    """Whether a header is exactly the one this worker's callbacks carry (run, task, name, reply target, a worker kind)."""
    return (header.run_id, header.task, header.sender, header.reply_to) == (
        run.run_id, worker.task_label, worker.name, worker.reply_target or worker.pane_id,
    ) and header.kind in WORKER_KINDS  # fmt: skip


def named_workers(run: Run, workers: list[Worker], raw: str) -> tuple[str, ...]:
    """The registered workers whose exact header appears in ``raw``, in order; empty unless it holds more than one header.

    A header in a kept-aside text proves nothing about who sent it (its fields are public registry facts), so it is
    only ever a reason to ask that worker, never to act on the text.
    """
    headers = headers_in(raw)
    if len(headers) < 2:
        return ()
    by_task = {w.task_label: w for w in workers}
    named: list[str] = []
    for h in headers:
        worker = by_task.get(h.task)
        if worker is not None and _names(run, worker, h) and h.task not in named:
            named.append(h.task)
    return tuple(named)


def possible_merges(ledger: Ledger, run: Run) -> list[PossibleMerge]:
    """Every kept-aside message of the run that may hold several workers' callbacks, in arrival order."""
    workers = ledger.list_workers(run.run_id)
    first: dict[str, int] = {}
    found = []
    for message in ledger.list_inbox(run.run_id, verdict=InboxVerdict.KEPT_ASIDE):
        tasks = named_workers(run, workers, message.raw)
        if not tasks:
            continue
        # The same text again after its repeat was asked for is that worker's own message, not a new merge.
        again = first.setdefault(message.fingerprint, message.id)
        found.append(PossibleMerge(inbox_id=message.id, tasks=tasks, again_of=again if again != message.id else None))
    return found


def request_for(ledger: Ledger, run: Run, task: str, inbox_id: int) -> Effect | None:
    """The request sent to ``task`` for the possible merge ``inbox_id``, if one was."""
    prefix = repeat_prefix(task, inbox_id)
    return next((e for e in ledger.list_effects(run.run_id, task_label=task) if e.key.startswith(prefix)), None)


def requests_made(ledger: Ledger, run: Run, task: str) -> int:
    """How often ``task`` was asked to repeat in this run."""
    return sum(1 for e in ledger.list_effects(run.run_id, task_label=task) if ":repeat:" in e.key)


def replied(ledger: Ledger, run: Run, request: Effect) -> bool:
    """Whether a message naming the asked worker (accepted or kept aside) was recorded after the request was sent."""
    assert request.task_label is not None
    high_water = int(request.key.rsplit(":", 1)[1])
    worker = ledger.get_worker(run.run_id, request.task_label)
    for message in ledger.list_inbox(run.run_id):
        if message.id <= high_water:
            continue
        if message.task_label == worker.task_label or any(_names(run, worker, h) for h in headers_in(message.raw)):
            return True
    return False


def pending(ledger: Ledger, run: Run) -> tuple[Effect | None, list[tuple[PossibleMerge, Worker]]]:
    """The newest request sent (it gates the next one) and the workers still to be asked, in merge and header order."""
    due: list[tuple[PossibleMerge, Worker]] = []
    sent: list[Effect] = []
    for merge in possible_merges(ledger, run):
        if merge.again_of is not None:
            continue
        for task in merge.tasks:
            request = request_for(ledger, run, task, merge.inbox_id)
            worker = ledger.get_worker(run.run_id, task)
            if request is not None:
                sent.append(request)
            # Only a worker at work (on its own) can have a callback missing: any other state was set by one that arrived.
            elif worker.state in AT_WORK and requests_made(ledger, run, task) < REPEAT_LIMIT and all(w.task_label != task for _, w in due):
                due.append((merge, worker))
    return (max(sent, key=lambda e: e.id) if sent else None), due


def ask_later(ledger: Ledger, run: Run, herdr_states: dict[str, str]) -> bool:
    """Whether a worker is due to be asked but was still ending its turn (herdr `working`) at the last check-in."""
    last, due = pending(ledger, run)
    if last is not None and last.task_label is not None and not replied(ledger, run, last) and ledger.get_worker(run.run_id, last.task_label).state in AT_WORK:
        return False  # the next request waits for that reply, not for a turn to end
    return any(herdr_states.get(worker.task_label) == "working" for _, worker in due)
