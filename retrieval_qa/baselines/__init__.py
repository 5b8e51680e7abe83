"""Non-neural baselines."""
