"""A model file's keys read without torch (`rlab.core.checkpoint.state_dict_keys`): the same keys torch.load
gives, None for what is not a zip-format state dict, and nothing a pickle names is run."""

from __future__ import annotations

import io
import pickle
import zipfile

import torch

from rlab.core.checkpoint import state_dict_keys


def test_the_keys_are_torch_loads(tmp_path):
    path = tmp_path / "model_000001.pt"
    state = {
        "transformer.wte.weight": torch.zeros(4, 2, dtype=torch.bfloat16),
        "lm_head.weight": torch.ones(3),
    }
    torch.save(state, path)
    assert state_dict_keys(path) == list(torch.load(path, weights_only=True))


def test_anything_else_is_left_to_torch(tmp_path):
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a zip")
    assert state_dict_keys(garbage) is None
    assert state_dict_keys(tmp_path / "missing.pt") is None
    not_tensors = tmp_path / "list.pt"
    torch.save({"a": 1}, not_tensors)
    assert state_dict_keys(not_tensors) is None


class _Boom:
    def __reduce__(self):
        import os

        return (os.system, ("echo should-not-run > /dev/null",))


def test_a_pickle_that_names_a_function_runs_nothing(tmp_path, monkeypatch):
    import os

    path = tmp_path / "evil.pt"
    with zipfile.ZipFile(path, "w") as z:
        buffer = io.BytesIO()
        pickle.dump({"x": _Boom()}, buffer)
        z.writestr("archive/data.pkl", buffer.getvalue())
    ran = []
    monkeypatch.setattr(os, "system", lambda *a: ran.append(a))
    assert state_dict_keys(path) == ["x"] and not ran  # os.system became a stub
