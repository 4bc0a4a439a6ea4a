"""rlab: controlled context-extension experiments on nanochat-style GPT models.

Importing the package is cheap on purpose: it pulls in neither torch nor wandb,
so `rlab --help` answers instantly.
"""

__version__ = "0.1.0"
