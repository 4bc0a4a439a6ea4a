"""nanochat a825e63 .. 92d63d4 (March to July 2026): value embeddings, residual scalars, smear, backout, windows."""
