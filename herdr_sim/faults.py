"""Fault injection: queued failures that the next matching simulated command(s) consume."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

from herdr_sim.alive import running
from herdr_sim.paths import Paths
from herdr_sim.state import Fault, Store, World


def die(when: str) -> None:
    """This herdr client process dies of SIGKILL at once: whoever called it gets no answer.

    The call log (HERDR_SIM_CALL_LOG, herdr_sim.forks.run_call) still gets its line, with rc -9 and ``died``
    saying whether herdr had acted ("after") or not ("before")."""
    from herdr_sim import forks

    log = os.environ.get("HERDR_SIM_CALL_LOG")
    if log:
        line = json.dumps({"pid": forks.caller(), "argv": list(sys.argv), "rc": -9, "stdout": "", "died": when}) + "\n"
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    forks.killed(signal.SIGKILL)  # this process, or under the call zygote its client too
    time.sleep(60)  # SIGKILL lands at once; never run on


def hang(paths: Paths, sock: Path) -> int:
    """This herdr client waits for an answer that never comes, as from a wedged herdr server.

    It connects to the server's socket, which the kernel accepts and nobody ever reads or answers (the simulated server
    never accepts a connection), and waits there: only its caller's time limit ends the call, and herdr acts on
    nothing. Should the server go away meanwhile, the client reports the connection reset as herdr's does."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(sock))
        conn.recv(1)  # nobody writes: returns only when the server's listener closes
    except OSError:
        while running(paths):  # a socket path too long to bind is only a file: wait on the server itself
            time.sleep(0.2)
    finally:
        conn.close()
    print('Error: Os { code: 104, kind: ConnectionReset, message: "Connection reset by peer" }', file=sys.stderr)
    return 1


def take(world: World, command: str) -> Fault | None:
    """Consume one use of the first fault queued for `<group> <sub>`."""
    for fault in world.faults:
        if fault.command == command:
            fault.times -= 1
            if fault.times <= 0:
                world.faults.remove(fault)
            return fault
    return None


def add(home: Path, command: str, *, code: str | None = None, message: str | None = None,
        drop_root_pane: bool = False, delay_ms: int | None = None, times: int = 1, die: str | None = None,
        hang: bool = False) -> None:
    """Queue a fault (Python API for tests). ``die``: "before" or "after" (see Fault.die); ``hang``: see Fault.hang."""
    if die not in (None, "before", "after"):
        raise ValueError(f"die is before or after, not {die!r}")
    with Store(Paths(home)).transaction() as world:
        world.faults.append(Fault(command=command, code=code, message=message, drop_root_pane=drop_root_pane,
                                  delay_ms=delay_ms, times=times, die=die, hang=hang or None))


def clear(home: Path) -> None:
    """Drop every queued fault."""
    with Store(Paths(home)).transaction() as world:
        world.faults.clear()


def listed(home: Path) -> list[Fault]:
    """The queued faults."""
    return list(Store(Paths(home)).load().faults)
