"""`orch doctor --offline`: the scripted model on 127.0.0.1 stands in for each agent's provider, so a probe spends no token.

With `orchestrator/demo.py`, the only orchestrator module allowed to import `herdr_sim`: the scripted model
(`herdr_sim.model`) is the real-agents lane's, and here it plays the model for the person's own installed agents.
Each kind gets a private configuration (provider pointed at the model, shell tool allowed, no update checks) that
its pane reaches through the agent's own config-dir variables, so the person's shell, HOME and agent settings stay
as they are and nothing the probe answers (a trust dialog) is written into them.
"""

from __future__ import annotations

from pathlib import Path

from herdr_sim.model.agents import KINDS, relocated
from herdr_sim.model.brains import Brain
from herdr_sim.model.server import ModelServer

OFFLINE_KINDS = KINDS
# As in the real-agents lane: an instant turn is over before herdr's screen detection ever sees the agent working.
THINK_S = 1.0


class OfflineModel:
    """The scripted model for one doctor: `with OfflineModel(scratch) as model:` then `model.agent(kind)`."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.server = ModelServer(scratch / "model.jsonl", Brain(), think_s=THINK_S)

    def __enter__(self) -> OfflineModel:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.close()

    @property
    def url(self) -> str:
        return self.server.url

    def agent(self, kind: str) -> tuple[dict[str, str], tuple[str, ...]] | None:
        """The pane environment and extra argv that point ``kind`` at the model; None for a kind offline cannot serve."""
        if kind not in OFFLINE_KINDS:
            return None
        env, argv = relocated(self.scratch / "agents", kind, self.url)
        return env, tuple(argv)

    def requests(self, task: str) -> int:
        """How many model requests carried this probe task's prompt (0: the agent never asked the scripted model)."""
        count = 0
        for entry in self.server.requests():
            if entry.get("method") == "POST" and task in str(entry.get("request")):
                count += 1
        return count
