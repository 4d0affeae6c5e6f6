"""Genomes and pair tables made here: the demos, and a genome assembled from known fragments."""
