"""`orch completion bash|zsh|fish`: print click's shell-completion script for orch."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

# The variable click's entry point watches (derived from the program name `orch`); the script sets it.
COMPLETE_VAR = "_ORCH_COMPLETE"
SHELLS = ("bash", "zsh", "fish")


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the shell-completion script for SHELL; source it from your shell's startup file.

    The script calls `orch` back with _ORCH_COMPLETE set, so completion always matches the installed orch.

    \b
    Example:
      orch completion bash > ~/.local/share/bash-completion/completions/orch
      orch completion zsh > "${fpath[1]}/_orch"
      orch completion fish > ~/.config/fish/completions/orch.fish
      eval "$(orch completion bash)"
    """
    cls = get_completion_class(shell)
    assert cls is not None  # click.Choice admits only the shells click registers
    click.echo(cls(ctx.find_root().command, {}, "orch", COMPLETE_VAR).source())
