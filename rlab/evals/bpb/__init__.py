"""Train and val bits per byte over fixed sets of whole documents (`score`, `doc_set`)."""
