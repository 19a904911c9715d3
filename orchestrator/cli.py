"""The `orch` command line: parse, call one engine function, render; no logic and no herdr calls here.

Commands are loaded lazily (`COMMANDS`): `orch --version` imports click and nothing else of weight, and each
command imports only what it uses, because every worker callback is an `orch inbox add` process.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import click

from orchestrator import __version__
from orchestrator.errors import ExitCode, HerdrUnavailable, OrchError, storage_error

# Command name -> "module:attribute" of its click command; `orch --help` lists them in this order (sorted).
COMMANDS: dict[str, str] = {
    "answer": "orchestrator.commands.observe:answer",
    "approve": "orchestrator.commands.observe:approve",
    "cancel": "orchestrator.commands.cancel:cancel",
    "completion": "orchestrator.commands.completion:completion",
    "demo": "orchestrator.commands.demo:demo",
    "dispatch": "orchestrator.commands.dispatch:dispatch",
    "doctor": "orchestrator.commands.doctor:doctor",
    "finish": "orchestrator.commands.finish:finish",
    "inbox": "orchestrator.commands.inbox:inbox",
    "integrate": "orchestrator.commands.verify:integrate",
    "observe": "orchestrator.commands.observe:observe",
    "packet": "orchestrator.commands.dispatch:packet",
    "plan": "orchestrator.commands.plan:plan",
    "preflight": "orchestrator.commands.preflight:preflight",
    "provision": "orchestrator.commands.provision:provision",
    "report": "orchestrator.commands.report:report",
    "resume": "orchestrator.commands.run:resume",
    "retire": "orchestrator.commands.retire:retire",
    "run": "orchestrator.commands.run:run",
    "send": "orchestrator.commands.observe:send",
    "status": "orchestrator.commands.report:status",
    "verify": "orchestrator.commands.verify:verify",
    "wait": "orchestrator.commands.observe:wait",
}


def failure_document(kind: str, message: str, hint: str | None, exit_code: int, next_steps: Sequence[dict[str, object]] = ()) -> dict[str, Any]:
    """The JSON a failed command prints on stdout under `--json`: the first problem, all of them, what to do, the exit
    code (and `next[]` when the failure names the controller's next step: a door command that met a herdr outage)."""
    lines = message.splitlines() or [kind]
    doc: dict[str, Any] = {"ok": False, "error": kind, "reason": lines[0], "problems": lines, "hint": hint, "exit_code": exit_code}
    if next_steps:
        doc["next"] = list(next_steps)
    return doc


def _known_error(exc: BaseException) -> tuple[str, str, str | None, int] | None:
    """(kind, message, hint, exit code) for the errors orch reports in words; None for a bug."""
    if isinstance(exc, OrchError):
        return type(exc).__name__, exc.message, exc.hint, int(exc.exit_code)
    # Disk full, read-only, locked or damaged storage: one line with what to do, never a traceback.
    stored = storage_error(exc, _orch_home())
    if stored is not None:
        return type(stored).__name__, stored.message, stored.hint, int(stored.exit_code)
    # The leaf packages' roots, looked up only if loaded: an exception of a module never imported cannot occur.
    for module, root in (("registry", "RegistryError"), ("packets", "PacketError")):
        loaded = sys.modules.get(module)
        if loaded is not None and isinstance(exc, getattr(loaded, root)):
            return type(exc).__name__, str(exc), None, int(ExitCode.FAILURE)
    return None


def _orch_home() -> str:
    """ORCH_HOME as this process resolves it, for a storage error's words (its placeholder when it cannot be told)."""
    try:
        from orchestrator.locations import locations

        return str(locations(os.environ)["orch_home"])
    except Exception:  # noqa: BLE001 (HOME unset or relative: the message still says where to look)
        return "$ORCH_HOME"


_HINTED = re.compile(r"`(orch [^`]+)`")


def with_caller_flags(hint: str | None) -> str | None:
    """``hint`` with each `orch …` command in it carrying `--json`, for a caller that used it (one exact form per step).

    Only commands that take `--json` are changed; a `--help` or a command orch cannot name is left as written.
    """
    if not hint:
        return hint
    from orchestrator.hints import with_flag

    def flagged(match: re.Match[str]) -> str:
        command = match.group(1)
        words = command.split()
        if "--json" in words or "--help" in words or not _takes_json(words[1:]):
            return match.group(0)
        return f"`{with_flag(command, '--json')}`"  # before a `-- TEXT`, which must stay last

    return _HINTED.sub(flagged, hint)


def _takes_json(words: Sequence[str]) -> bool:
    ctx = click.Context(cli)
    command: click.Command | None = cli
    for word in words:
        if not isinstance(command, click.Group):
            break
        command = command.get_command(ctx, word)
        if command is None:
            return False
    return command is not None and not isinstance(command, click.Group) and any(p.name == "as_json" for p in command.params)


def _print_json(doc: dict[str, Any]) -> None:
    click.echo(json.dumps(doc, indent=2))


@contextmanager
def error_handler(as_json: bool = False, emitted: Any = None) -> Iterator[None]:
    """Turn OrchError into one `orch: <message>` line and its exit code; never a traceback.

    With ``as_json`` the same failure is also printed as one JSON document on stdout (unless the command already
    printed its own result there: ``emitted()`` says so), so `orch X --json > out.json` is always parseable.
    """
    try:
        yield
    except click.exceptions.Exit:
        raise
    except click.ClickException as exc:
        if as_json and not (emitted and emitted()):
            usage = exc.ctx.command_path if isinstance(exc, click.UsageError) and exc.ctx is not None else None
            hint = f"`{usage} --help` shows the usage" if usage else None
            kind = "UsageError" if isinstance(exc, click.UsageError) else type(exc).__name__
            _print_json(failure_document(kind, exc.format_message(), hint, exc.exit_code))
        raise
    except click.Abort:
        if as_json and not (emitted and emitted()):
            _print_json(failure_document("Aborted", "aborted", None, int(ExitCode.FAILURE)))
        raise
    except KeyboardInterrupt:
        if as_json and not (emitted and emitted()):
            _print_json(failure_document("Interrupted", "interrupted", None, int(ExitCode.INTERRUPTED)))
        click.echo("orch: interrupted", err=True)
        sys.exit(int(ExitCode.INTERRUPTED))
    except Exception as exc:
        known = _known_error(exc)
        if known is None:
            raise
        kind, message, hint, code = known
        if as_json:
            hint = with_caller_flags(hint)
        if as_json and not (emitted and emitted()):
            _print_json(failure_document(kind, message, hint, code, getattr(exc, "next_steps", ())))
        from packets.inert import inert_line  # a message may quote worker text (a path, a reason)

        # A multi-problem error (e.g. a plan with three mistakes) prints one `orch:` line per problem.
        for line in message.splitlines() or [kind]:
            click.echo(f"orch: {inert_line(line)}", err=True)
        if hint:
            click.echo(f"hint: {inert_line(hint)}", err=True)
        sys.exit(code)


@contextmanager
def _no_pydantic_plugins() -> Iterator[None]:
    """Build orch's pydantic models (at import) without looking for pydantic plugins; orch uses none.

    The look-up reads the metadata of every installed distribution: a tenth of an `orch inbox add` callback's
    start-up. PYDANTIC_DISABLE_PLUGINS is pydantic's documented switch; it is set only while commands are imported,
    so processes orch starts (verify commands, git, herdr) never inherit it.
    """
    if "PYDANTIC_DISABLE_PLUGINS" in os.environ:
        yield
        return
    os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"
    try:
        yield
    finally:
        os.environ.pop("PYDANTIC_DISABLE_PLUGINS", None)


def wants_json(args: Sequence[str]) -> bool:
    """Whether the command line asks for `--json` (before any `--`): known before click parses, so usage errors count."""
    words = list(args)
    if "--" in words:
        words = words[: words.index("--")]
    return "--json" in words


class OrchGroup(click.Group):
    """The root group: commands load on first use, and every subcommand runs inside the one error handler."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attr = target.split(":")
        with _no_pydantic_plugins():
            command: click.Command = getattr(importlib.import_module(module), attr)
        return command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["orch.argv"] = list(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        ctx.ensure_object(dict)
        ctx.obj["emitted"] = False
        as_json = wants_json(ctx.meta.get("orch.argv", ()))
        with error_handler(as_json, lambda: ctx.obj.get("emitted", False)):
            try:
                return super().invoke(ctx)
            except HerdrUnavailable as exc:
                # herdr down or not answering ends a door command as it ends `orch run`: its run stopped, one line.
                from orchestrator.door import stop_for_outage

                raise stop_for_outage(ctx.obj.get("engine"), exc, as_json=as_json) from None


@click.group(cls=OrchGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="orch", message="%(prog)s %(version)s")
@click.option("--herdr", "herdr", metavar="PATH", envvar="ORCH_HERDR", help="herdr binary to run (default: herdr; env ORCH_HERDR).")
@click.option("-v", "--verbose", is_flag=True, help="Echo every herdr call to stderr.")
@click.pass_context
def cli(ctx: click.Context, herdr: str | None, verbose: bool) -> None:
    """Run a fleet of coding-agent workers inside herdr.

    \b
    Example:
      orch plan check plan.toml
    """
    ctx.ensure_object(dict)
    ctx.obj.update(herdr=herdr, verbose=verbose)


def main() -> None:
    """Console-script entry point."""
    with error_handler():
        cli(standalone_mode=True)
