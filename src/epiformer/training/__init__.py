"""Training a model: the loop, checkpoints, data-parallel processes."""
