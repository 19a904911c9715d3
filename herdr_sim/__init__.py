"""A faithful simulator of the herdr CLI (0.7.5, 0.8.2 and 0.9.x: herdr_sim.versions), for tests and the demo; imports nothing from orch's packages."""
