"""The nanochat adapter: everything rlab knows about checkpoints nanochat wrote, one folder per generation.

After torchtitan's per-model `state_dict_adapter`: rlab's model (`rlab.core.gpt.GPT`) builds the parts an
`Architecture` switches on, and this package says how each nanochat generation's files map onto it.

    generations.py      the known generations (name -> Architecture), in detection order
    detect.py           which generation a checkpoint is, from its meta and its state-dict keys
    state_dict.py       nanochat's key names per generation and its loader's patches for older files
    loader_position.py  where a continuation starts reading: nanochat's own dataloader resume rule
    optim_state.py      the world-size-free optimizer state the readers produce
    optim_import.py     nanochat's per-rank optimizer shards -> rlab's optimizers (tries each generation's reader)
    gen2025/, gen2026/  one generation each: `architecture.py` (its parts, rotary base, nanochat commits) and
                        `optimizer.py` (`read_shards`: its per-rank optimizer files -> `FullState`, or None)

A new nanochat generation is one folder `genYYYY/` with those two modules, listed in `generations.GENERATIONS`
and `optim_import.READERS`; parts of the model it adds are `Architecture` flags the blocks in `rlab.core` build.
"""
