"""BPB vs context length: the same targets at every length (`same_targets`), or YaRN's sliding-window and
truncated perplexity (`sliding`)."""
