"""Loss on a passage repeated at a known distance vs the same passage unseen (`task`)."""
