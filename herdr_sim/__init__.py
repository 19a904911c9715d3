"""A faithful simulator of the herdr 0.7.5 CLI, for tests and the demo; imports nothing from orch's packages."""

HERDR_VERSION = "0.7.5"
