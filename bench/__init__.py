"""`make bench`: performance figures printed as ratios measured in one run (never timed tests)."""
