"""Passkey retrieval by generation: a key hidden at a depth of filler, read back greedily (`task`)."""
