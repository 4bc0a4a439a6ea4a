"""Export an rlab checkpoint to another ecosystem: `rlab export --format hf` writes a Hugging Face transformers folder.

`hf_rope` says an arm's RoPE in transformers' vocabulary (or why it cannot), `hf_weights` maps nanochat's
state-dict keys to transformers', `hf_tokenizer` turns the tiktoken tokenizer into a `tokenizers` one, `card`
writes the README, `hf` puts the folder together and checks it round trip. `modeling_rlab_nanochat` is the
modeling file the folder ships where transformers' own NanoChat model does not fit. transformers and
safetensors are the `[hf]` extra, imported only here.
"""
