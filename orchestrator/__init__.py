"""orch: the herdr orchestration engine (controller side)."""

__version__ = "0.1.0"
