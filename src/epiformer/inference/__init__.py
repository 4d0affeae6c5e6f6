"""A trained model folder in, scores out, on the best device there is."""
