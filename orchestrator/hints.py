"""The one form of every `orch` command orch prints (hints, `next[]`, `waiting[].commands`, notes): exact as printed."""

from __future__ import annotations

import shlex

# Where the person's or the agent controller's own words go: they replace it, quoted for their shell.
TEXT = "TEXT"
# Words that end the options: whatever follows is an argument, even words that start with `-`.
END_OF_OPTIONS = "--"


def orch_command(*words: str, text: bool = False, as_json: bool = False) -> str:
    """``orch WORDS… [--json] [-- TEXT]``: a command to run as printed, with TEXT replaced by the caller's words, quoted.

    Free text goes last, after ``--``: words that start with `-` (``-1 is wrong``, ``--force it``) are then TEXT,
    never an option click would refuse or take (`--json`). An option's TEXT (``--reason TEXT`` among ``words``) needs
    no ``--``: click takes the word after such an option whatever it looks like. ``--json`` (the caller's own flag)
    comes before the ``--``. Each word is shell-quoted where it must be, so an id or label is always one word.
    """
    argv = ["orch", *(w if w == TEXT else shlex.quote(w) for w in words)]
    if as_json:
        argv.append("--json")
    if text:
        argv += [END_OF_OPTIONS, TEXT]
    return " ".join(argv)


def with_flag(command: str, flag: str) -> str:
    """``command`` (as ``orch_command`` printed it) with ``flag`` added among its options, before any ``-- TEXT``."""
    head, sep, tail = command.partition(f" {END_OF_OPTIONS} ")
    return f"{head} {flag}{sep}{tail}"
