"""A remote worker's callbacks: spooled durably on its own host, collected by the controller into the one intake path.

A worker on another host cannot reach the controller's ledger, and the controller (or the link) may be down when it
calls back. So its packet's callback command is that host's `orch inbox add --spool --run RUN TEXT`, which needs
nothing but the host's disk: the message becomes one spool entry (``<ORCH_HOME>/spool/<run>/<id>.msg``, written to a
temp file, fsynced, renamed, the folder fsynced) and the command exits 0. Nothing is judged there.

The controller collects at each check-in (``collect``, from ``orchestrator.observe``: `orch run`, `orch wait` and
every other check-in alike), over ssh (``orchestrator.remote``): `orch inbox spooled --run RUN --json` lists the
host's entries, each goes through ``orchestrator.intake`` (the one acceptance rule, the one ledger) with the source
``spool:<host>:<id>``, and only after that ledger write `orch inbox ack --run RUN ID...` removes them there. A
collection cut short between the two finds the entry again next time, and the ledger, which records a source once per
run (migration 6), says it is already recorded: it is only acknowledged. Each message is recorded exactly once, even
by two collections at once, and none is removed before it is in the ledger.

The run's last step (`orch finish`, and `orch run`/`orch resume` before they integrate) collects once more
(``collect_last``): a message sent after the last check-in is judged before the run is; a host that cannot be reached
then keeps its messages and the report says so (a ``spool_last`` fact).

The host side (``write``, ``pending``, ``ack``) imports nothing but the standard library and orch's locations: a
worker's callback stays a short process (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from orchestrator.locations import run_dir
from registry.kinds import SPOOL_SOURCE

if TYPE_CHECKING:
    from orchestrator.engine import Engine
    from orchestrator.intake import Added
    from orchestrator.plan import Host
    from registry.records import Run

SPOOL = "spool"
SUFFIX = ".msg"
# The most an entry keeps whole: the largest message limit a run may have (packets.envelope.MESSAGE_LIMIT_RANGE), so
# the controller judges it against its run's own limit. A longer one keeps only what the ledger would keep of it.
KEEP_BYTES = 1024 * 1024
PREFIX_BYTES = 2048  # orchestrator.intake.KEPT_PREFIX_BYTES
# What one listing over ssh carries at most (the rest waits for the next check-in): entries and bytes.
BATCH_ENTRIES = 200
BATCH_BYTES = 8 * 1024 * 1024
# `<ns since the epoch, 20 digits>-<pid>-<8 hex>`: sorts in the order sent, unique without any coordination.
ENTRY_ID = re.compile(r"[0-9]{20}-[0-9]{1,10}-[0-9a-f]{8}")
SOURCE = SPOOL_SOURCE + "{host}:{id}"  # one delivery: the ledger records it once per run (migration 6)


_PANE = re.compile(r"[A-Za-z0-9:_.-]{1,64}")


def pane_id(value: str | None) -> str | None:
    """A sender's HERDR_PANE_ID as kept with its entry: a plausible herdr id, else none (it is the sender's own claim)."""
    return value if value is not None and _PANE.fullmatch(value) else None


def folder(orch_home: Path, run_id: str) -> Path:
    """A run's spool on this host: ``<ORCH_HOME>/spool/<run id, unsafe characters as _>``."""
    return orch_home / SPOOL / run_dir(orch_home, run_id).name


@dataclass(frozen=True)
class Entry:
    """One spooled message: its id, its whole size and hash, and its bytes (all of them when ``complete``)."""

    id: str
    size: int
    sha256: str
    complete: bool
    data: bytes
    pane: str | None = None  # the herdr pane it was sent from on its host (HERDR_PANE_ID there), if any

    def as_json(self) -> dict[str, Any]:
        """How `orch inbox spooled --json` hands it to the controller (the bytes in base64: a message is any bytes)."""
        return {"id": self.id, "size": self.size, "sha256": self.sha256, "complete": self.complete, "pane": self.pane,
                "data": base64.b64encode(self.data).decode("ascii")}  # fmt: skip

    @classmethod
    def from_json(cls, item: Any) -> Entry:
        """The controller's reading of one listed entry; ValueError for anything that is not one."""
        ident, size, digest, complete, data, pane = (
            (item.get(k) for k in ("id", "size", "sha256", "complete", "data", "pane")) if isinstance(item, dict) else [None] * 6
        )
        if not (isinstance(ident, str) and ENTRY_ID.fullmatch(ident) and isinstance(size, int) and size >= 0 and isinstance(digest, str)
                and isinstance(complete, bool) and isinstance(data, str) and (pane is None or isinstance(pane, str))):  # fmt: skip
            raise ValueError("a spool entry is malformed")
        return cls(ident, size, digest, complete, base64.b64decode(data.encode("ascii"), validate=True), pane_id(pane))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_stream(stream: BinaryIO) -> tuple[bytes, int, str]:
    """A message from stdin: at most ``KEEP_BYTES + 1`` of its bytes kept, all of them counted and hashed."""
    digest, kept, size = hashlib.sha256(), bytearray(), 0
    while chunk := stream.read(64 * 1024):
        digest.update(chunk)
        size += len(chunk)
        if len(kept) <= KEEP_BYTES:
            kept += chunk[: KEEP_BYTES + 1 - len(kept)]
    return bytes(kept), size, digest.hexdigest()


def write(
    spool: Path, data: bytes, *, size: int | None = None, sha256: str | None = None, pane: str | None = None, now_ns: int | None = None
) -> str:
    """Spool one message durably and return its id: temp file, fsync, rename, fsync the folder (exactly one entry or none).

    ``data`` is the message, or its first bytes when ``size`` and ``sha256`` say it was longer (``read_stream``).
    """
    spool.mkdir(parents=True, exist_ok=True, mode=0o700)
    ident = f"{time.time_ns() if now_ns is None else now_ns:020d}-{os.getpid()}-{secrets.token_hex(4)}"
    size = len(data) if size is None else size
    complete = size <= KEEP_BYTES
    header = {"size": size, "sha256": hashlib.sha256(data).hexdigest() if sha256 is None else sha256, "complete": complete, "pane": pane_id(pane)}
    body = json.dumps(header).encode("ascii") + b"\n" + (data if complete else data[:PREFIX_BYTES])
    tmp = spool / f".{ident}.tmp"  # never listed: a crash mid-write leaves no entry, only this
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, spool / f"{ident}{SUFFIX}")
    _fsync_dir(spool)
    return ident


def read_entry(path: Path) -> Entry:
    """One entry file; ValueError when it is not one (it is then left where it is, never removed)."""
    raw = path.read_bytes()
    head, _, data = raw.partition(b"\n")
    header = json.loads(head.decode("ascii"))
    return Entry.from_json({**header, "id": path.name[: -len(SUFFIX)], "data": base64.b64encode(data).decode("ascii")})


def pending(spool: Path, *, most: int | None = None, budget: int | None = None) -> list[Entry]:
    """The entries of a spool, oldest first (a missing spool has none): at most ``most``, and no more after their bytes
    pass ``budget`` (one always), so a worker that floods its spool is collected in batches, one per check-in."""
    try:
        names = sorted(p.name for p in spool.iterdir() if p.name.endswith(SUFFIX) and ENTRY_ID.fullmatch(p.name[: -len(SUFFIX)]))
    except FileNotFoundError:
        return []
    out: list[Entry] = []
    size = 0
    for name in names[:most]:
        if out and budget is not None and size >= budget:
            break
        out.append(read_entry(spool / name))
        size += len(out[-1].data)
    return out


def ack(spool: Path, ids: Iterable[str]) -> int:
    """Remove the named entries (the controller has recorded them); an unknown or gone one is no error. How many went."""
    removed = 0
    for ident in ids:
        if not ENTRY_ID.fullmatch(ident):
            continue  # never a path: only a name this module gave
        try:
            (spool / f"{ident}{SUFFIX}").unlink()
            removed += 1
        except FileNotFoundError:
            pass
    if removed:
        _fsync_dir(spool)
    return removed


def spool_message(env: Mapping[str, str], run_id: str, text: str, stdin: BinaryIO) -> str:
    """`orch inbox add --spool --run RUN TEXT|-` on a worker's host: the message spooled under this host's ORCH_HOME, its id.

    Nothing is judged here (the controller does, with the run's ledger); only an empty message is refused, as the
    controller's own intake refuses it.
    """
    from orchestrator.errors import OrchError
    from orchestrator.locations import locations

    if text == "-":
        data, size, digest = read_stream(stdin)
    else:
        data = text.encode("utf-8", errors="surrogateescape")  # argv's own bytes, as the intake counts them
        size, digest = len(data), hashlib.sha256(data).hexdigest()
    if size <= KEEP_BYTES and not data.decode("utf-8", errors="replace").strip():
        raise OrchError("the message is empty", hint="pass the envelope as TEXT, or pipe it in: `orch inbox add --spool --run RUN_ID - < callback.txt`")
    return write(folder(locations(env)["orch_home"], run_id), data, size=size, sha256=digest, pane=env.get("HERDR_PANE_ID"))


def render_spooled(ident: str, run_id: str) -> str:
    """What `orch inbox add --spool` says: kept on this host, judged by the controller when it collects it."""
    return f"spooled {ident} for run {run_id} on this host: the controller judges it when it next checks in\n"


# --- the argv a packet and the controller use ---------------------------------------------------------------------


def host_orch(host: Host) -> list[str]:
    """The host's orch as a remote argv prefix: ``[env ORCH_HOME=…] ORCH`` (``[hosts.X] orch_home``, else its default)."""
    home = getattr(host, "orch_home", None)
    return ["env", f"ORCH_HOME={home}", host.orch] if home else [host.orch]


def callback_prefix(host: Host, run_id: str) -> tuple[str, ...]:
    """The packet's callback command for a worker on ``host``: its own orch spools the message there."""
    return (*host_orch(host), "inbox", "add", "--spool", "--run", run_id)


# --- the controller's collection ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Collected:
    """One host's collection at a check-in: what was recorded, what was found already recorded, and any problem."""

    host: str
    added: tuple[Added, ...] = ()
    already: int = 0
    problem: str | None = None


def to_raw(entry: Entry, limit: int) -> Any:
    """An entry as the intake reads a message from stdin (``intake.Raw``), measured against the run's limit."""
    import io

    from orchestrator.intake import Raw, _decode, read_stream

    if entry.complete:
        return read_stream(io.BytesIO(entry.data), limit)
    return Raw(text=_decode(entry.data[:PREFIX_BYTES]), size=entry.size, sha256=entry.sha256, complete=False)


def remote_hosts(engine: Engine, run: Run) -> list[str]:
    """The hosts other than the controller's that run this run's workers (the ledger's `workers.host`), sorted."""
    from registry.kinds import CONTROLLER_HOST

    return sorted({w.host for w in engine.ledger.list_workers(run.run_id) if w.host != CONTROLLER_HOST})


def collect(engine: Engine, run: Run, *, hosts: Mapping[str, Host] | None = None) -> list[Collected]:
    """Bring every spooled callback of the run home: list over ssh, record each through the intake, then acknowledge.

    ``hosts``: the plan's `[hosts]` (default: the run's plan snapshot). Runs under the run's driver lock (every
    check-in holds it); should two collections of a run still interleave, the ledger records each entry once (its
    source is unique per run). A host that cannot be reached keeps its entries (durable there) and is collected at a
    later check-in.
    """
    names = remote_hosts(engine, run)
    if not names:
        return []
    from orchestrator import remote
    from orchestrator.intake import Intake

    planned = engine.plan_for(run).plan.hosts if hosts is None else hosts
    runner = engine.remote_runner or remote.run_process
    intake: Intake | None = None
    out: list[Collected] = []
    for name in names:
        host = planned.get(name)
        if host is None:
            out.append(Collected(name, problem=f"host {name} is not in the run's plan"))
            continue
        listed = remote.run_remote(host.ssh, [*host_orch(host), "inbox", "spooled", "--run", run.run_id, "--json"], runner=runner)
        if listed.returncode != 0:
            out.append(Collected(name, problem=f"cannot list its spool: {listed.detail()}"))
            continue
        try:
            document = json.loads(listed.stdout)
            entries = [Entry.from_json(item) for item in document["messages"]]
        except (ValueError, KeyError, TypeError) as exc:
            out.append(Collected(name, problem=f"its spool listing is not orch's: {exc}"))
            continue
        if not entries:
            out.append(Collected(name))
            continue
        if intake is None:
            intake = Intake.of(engine, run)
        added: list[Added] = []
        done: list[str] = []
        already = 0
        for entry in entries:
            # Judged as sent from its pane on that host: compared only with that host's workers' panes. The ledger
            # records an entry once per run: one a collection cut short before its acknowledgement recorded, or another
            # collection recorded since this one listed it, is "already recorded" and nothing more.
            one = intake.add(to_raw(entry, intake.limit), source=SOURCE.format(host=name, id=entry.id), host=name, pane=entry.pane)
            if one.already_recorded:
                already += 1
            else:
                added.append(one)
            done.append(entry.id)  # only once the ledger holds it
        acked = remote.run_remote(host.ssh, [*host_orch(host), "inbox", "ack", "--run", run.run_id, *done], runner=runner)
        problem = None if acked.returncode == 0 else f"cannot acknowledge its spool entries (collected again next time, recorded once): {acked.detail()}"
        out.append(Collected(name, tuple(added), already, problem))
    return out


def collect_last(engine: Engine, run: Run) -> tuple[int, list[str]]:
    """The collection before a run is judged (``collect``, once more): how many messages it recorded, and a line for each
    host it could not collect from (its messages are kept there). Each outcome is a ``spool_last`` fact for the report;
    a host reached again after such a miss is recorded too, so the report says only what still waits on a host."""
    from registry.facts import FactKind, SpoolLast, read_facts

    found = collect(engine, run)
    missed = {f.get("host"): f.get("problem") for f in read_facts(engine.ledger.events(run.run_id), SpoolLast)}
    kept: list[str] = []
    for one in found:
        if one.problem is not None:
            kept.append(kept_text(one.host, one.problem))
        if one.problem is not None or missed.get(one.host) is not None:
            engine.ledger.record_fact(run.run_id, FactKind.SPOOL_LAST, detail=SpoolLast(host=one.host, problem=one.problem))
    return sum(len(one.added) for one in found), kept


def kept_text(host: str, problem: str) -> str:
    """What the report says of a host the last collection did not reach."""
    return f"host {host} was not collected from before the run was judged ({problem}); messages its workers spooled after the last check-in are kept there"
