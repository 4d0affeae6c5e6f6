"""Why a pair scores as it does: attributions and the motifs found in them."""
