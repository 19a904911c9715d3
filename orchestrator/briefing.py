"""Delegation packets from the plan, the ledger and the run (spec §2): one standalone packet per worker, saved as sent."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.engine import Engine
from orchestrator.errors import OrchError
from orchestrator.intake import message_limit
from orchestrator.plan import ResolvedPlan, ResolvedWorker
from orchestrator.reportfiles import pin_roots, report_dir
from packets import Packet, build_packet, render_packet
from registry import Run, Worker

# A packet is one argv word of `herdr agent prompt`; Linux caps one argument at 128 KiB (MAX_ARG_STRLEN), so stay at half.
PACKET_LIMIT_BYTES = 64 * 1024

DEFAULT_EVIDENCE: tuple[str, ...] = (
    "Every changed file, with path:line references to the changes that matter.",
    "The full SHA of every commit you made.",
    "The genuine output of every verification command below (never a summary of it).",
)
# Read-only work (an empty claim): nothing to commit, so the evidence is what was found and the checks' output.
READ_ONLY_SCOPE = "Read and report only: the objective above, without changing any file."
READ_ONLY_EVIDENCE: tuple[str, ...] = (
    "path:line references for every finding.",
    "The genuine output of every verification command below (never a summary of it).",
)

# Free-text fields that may be moved out of the prompt, largest first, when the packet is too big for one argv word.
_MOVABLE = ("objective", "deliverable")


@dataclass(frozen=True, kw_only=True)
class Briefing:
    """A worker's packet, its exact text and where that text is (or would be) saved."""

    task: str
    packet: Packet
    text: str
    path: Path
    sha256: str
    size: int
    # Large fields moved out of the prompt: field name -> file the packet references instead.
    moved: dict[str, Path] = field(default_factory=dict)


def default_verification(base_sha: str) -> tuple[str, ...]:
    """Checks for a plan entry without `verify`: git facts that are true whatever the worker did, never a fake test run."""
    return ("git status --short", f"git diff --stat {base_sha} HEAD")


def packet_dir(engine: Engine, run: Run) -> Path:
    """Where a run's packets are saved (the evidence of what was sent)."""
    return engine.run_dir(run.run_id) / "packets"


def brief(engine: Engine, run: Run, task: str, *, plan: ResolvedPlan | None = None, save: bool = True) -> Briefing:
    """Build, render and (unless ``save`` is False) save the packet of one task; bad input is one OrchError line."""
    plan = plan or engine.plan_for(run)
    planned = engine.planned(plan, task)
    worker = engine.ledger.get_worker(run.run_id, task)
    fields = packet_fields(engine, run, plan, planned, worker)
    folder = packet_dir(engine, run)
    moved: dict[str, Path] = {}
    packet = build_packet(fields)
    text = render_packet(packet)
    for name in sorted(_MOVABLE, key=lambda f: -len(str(fields[f]))):
        if len(text.encode()) <= PACKET_LIMIT_BYTES:
            break
        moved[name] = folder / f"{task}.{name}.md"
        fields[name] = (
            f"Too long for a prompt: read the full {name} in {moved[name]} before you start; it is part of this packet."
        )
        fields["context_files"] = (*fields["context_files"], str(moved[name]))  # type: ignore[misc]
        packet = build_packet(fields)
        text = render_packet(packet)
    size = len(text.encode())
    if size > PACKET_LIMIT_BYTES:
        raise OrchError(
            f"the packet of {task} is {size} bytes even with its objective and deliverable in files; a prompt is one argv word of at most {PACKET_LIMIT_BYTES} bytes",
            hint="shorten the worker's scope, exclusions, evidence or verify lists in the plan",
        )
    path = folder / f"{task}.md"
    if save:
        folder.mkdir(parents=True, exist_ok=True)
        # The packet names this directory as a place to write reports; it must exist when the worker reads that.
        Path(packet.report_dir or folder).mkdir(parents=True, exist_ok=True)
        # Before the worker runs: where it may write reports, as real paths it cannot move afterwards.
        pin_roots(engine.run_dir(run.run_id), task, worker.worktree_path)
        original = packet_fields(engine, run, plan, planned, worker)
        for name, target in moved.items():
            _write(target, f"# {name.capitalize()} of task {task} (run {run.run_id})\n\n{original[name]}\n")
        _write(path, text)
    return Briefing(task=task, packet=packet, text=text, path=path, sha256=hashlib.sha256(text.encode()).hexdigest(), size=size, moved=moved)


def packet_fields(engine: Engine, run: Run, plan: ResolvedPlan, planned: ResolvedWorker, worker: Worker) -> dict[str, object]:
    """The packet's fields: the plan entry, where provisioning put the worker (ledger), and the run's ids and base."""
    entry = planned.worker
    base_sha = worker.base_sha or run.base_sha
    if not base_sha:
        raise OrchError(f"run {run.run_id} has no base SHA for {planned.task}", hint="run `orch preflight PLAN` first: it resolves the base ref")
    return {
        "run_id": run.run_id,
        "task_label": planned.task,
        "worker_name": planned.name,
        "worker_target": planned.name,
        "controller_target": run.controller_target,
        "worker_kind": planned.kind,
        "repo_path": _norm(run.repo_path or str(plan.repo.checkout)),
        "workdir": _norm(worker.worktree_path or str(planned.worktree.path)),
        "branch": planned.worktree.branch,
        "base_ref": run.base_ref or plan.plan.base,
        "base_sha": base_sha,
        "execution_mode": planned.mode,
        "objective": entry.objective,
        "deliverable": entry.deliverable,
        # An empty claim is read-only work: the packet's File claim then forbids every change.
        "scope": entry.scope or entry.claim or (READ_ONLY_SCOPE,),
        "exclusions": entry.exclusions,
        "file_claim": entry.claim,
        "evidence": entry.evidence or (DEFAULT_EVIDENCE if entry.claim else READ_ONLY_EVIDENCE),
        "verification": entry.verify or default_verification(base_sha),
        "stop_conditions": planned.stop_conditions,
        "context_files": (),
        "callback_prefix": engine.callback_prefix(run, planned.host),
        "report_dir": str(report_dir(engine.run_dir(run.run_id), planned.task)),
        "message_limit": message_limit(engine, run),
    }


def _norm(path: str) -> str:
    return os.path.normpath(path)


def _write(path: Path, text: str) -> None:
    # Write then rename, so a reader (or a crash) never sees half a packet.
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
