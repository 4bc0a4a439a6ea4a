"""RULER-style synthetic long-context tasks (Hsieh et al. 2024) over the long-document set (`tasks`)."""
