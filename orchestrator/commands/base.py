"""What every subcommand shares: the engine built from the group's options, `--json`/`--run` options, output."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:  # imported when a command first needs an engine: `orch --version` stays cheap
    from orchestrator.engine import Engine

F = TypeVar("F", bound=Callable[..., Any])


def engine_from(ctx: click.Context) -> Engine:
    """The Engine for this invocation (one per process; closed when the command ends)."""
    root = ctx.find_root()
    root.ensure_object(dict)
    obj: dict[str, Any] = root.obj
    if "engine" not in obj:
        from orchestrator.engine import Engine

        verbose = obj.get("verbose", False)

        def echo_call(call: Any) -> None:
            if verbose:
                from packets.inert import inert_line  # argv carries message texts: one line, escaped

                click.echo(f"herdr: {inert_line(' '.join(call.argv))} -> {call.returncode}", err=True)  # all calls, git's too: the run's orch.log

        engine = Engine.from_env(dict(os.environ), herdr_binary=obj.get("herdr"), echo=progress_echo, on_call=echo_call, defer_herdr=True, log_calls=True)
        # Who holds a run's one-driver lock, as a refused second driver is told: `orch resume`, `orch inbox add`…
        # (the command's words only: its arguments may carry message text).
        names = []
        here: click.Context | None = ctx
        while here is not None and here.parent is not None:
            names.append(here.info_name or "")
            here = here.parent
        engine.command = " ".join(["orch", *reversed(names)])
        # Commands read or act on recorded runs: none creates a ledger (`orch run` and `orch preflight` may).
        engine.ledger_mode = "existing"
        obj["engine"] = engine
        root.call_on_close(engine.close)
    engine_: Engine = obj["engine"]
    return engine_


def progress_echo(line: str) -> None:
    """Progress lines go to stderr so stdout stays the command's result (and `--json` stays parseable)."""
    from packets.inert import inert

    click.echo(inert(line), err=True)


def json_option(func: F) -> F:
    """`--json`: print the command's result as one JSON document on stdout."""
    return click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")(func)


def run_option(func: F) -> F:
    """`--run RUN_ID`: which run (default: the newest unfinished run of this controller pane)."""
    return click.option("--run", "run_id", metavar="RUN_ID", help="Run id (default: the newest unfinished run of this pane).")(func)


def echo_json(doc: Any) -> None:
    """Print one JSON document on stdout, and note it: a failure raised afterwards must not print a second one."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        root = ctx.find_root()
        root.ensure_object(dict)
        root.obj["emitted"] = True
    click.echo(json.dumps(doc, indent=2))


def emit_next(engine: Engine, run_id: str, result: Any, as_json: bool, render: Callable[[Any], str]) -> None:
    """Print a door command's result and what the controller does next (`next[]`, every command exact, with `--json`
    when the caller used it): the agent controller never has to work out which command comes after this one."""
    from orchestrator.door import next_after, render_next

    steps = next_after(engine, engine.ledger.get_run(run_id), as_json=as_json)
    if as_json:
        from orchestrator.effects import to_json

        echo_json({**to_json(result), "next": [to_json(s) for s in steps]})
    else:
        from packets.inert import inert

        click.echo(inert(render(result) + "".join(line + "\n" for line in render_next(steps))), nl=False)


def emit(result: Any, as_json: bool, render: Callable[[Any], str]) -> None:
    """Print a result (a --json result model, or a plain record: ``orchestrator.effects.to_json``): its JSON (stable,
    for agents) or its human rendering, with any worker text made inert."""
    if as_json:
        from orchestrator.effects import to_json

        echo_json(to_json(result))
    else:
        from packets.inert import inert

        # The last line of defence: renderers keep worker text on its line, this escapes whatever is left.
        click.echo(inert(render(result)), nl=False)
