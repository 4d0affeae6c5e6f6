"""The EPI Transformer: its configuration, the attention maths (ops) and the modules."""
