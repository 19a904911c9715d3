"""Entry point for ``python -m orchestrator``: the same as the `orch` console script."""

from orchestrator.entry import main

main()
