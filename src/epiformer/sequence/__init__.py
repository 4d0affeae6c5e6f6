"""DNA as data: the alphabet, one-hot and its packing, reverse complement, motifs."""
