"""Delegation packets and the Message Contract grammar; imports nothing from orchestrator or registry."""
