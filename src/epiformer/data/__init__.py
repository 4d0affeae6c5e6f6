"""From pair tables to model batches: genome, pairs, windows, splits, encoding, shards, batches."""
