"""Effect: what GenEnv does to a model (the held-out table, the toy-scale claim, the environment's valid and novel tasks)."""
