"""The simulator's CLI, one module per herdr noun as herdr keeps them (src/cli/<noun>.rs); `herdr_sim.cli` dispatches."""
