"""nanochat d314e96 (December 2025), and rlab's own from-scratch models by default."""
