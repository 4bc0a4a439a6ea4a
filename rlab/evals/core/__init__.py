"""DCLM CORE: the bundle (`bundle`), prompts, reference and packed scoring, and the metric (`metric`)."""
