"""The `orch` subcommands, one module per command group; each is thin: parse, call one engine phase, render."""
