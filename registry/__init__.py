"""Durable worker registry (SQLite ledger) and the worker state machine; imports nothing from orchestrator or packets."""
