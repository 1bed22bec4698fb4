"""Cost: speed, memory and scaling of the engine's phases, on a CPU and on a lent GPU."""
