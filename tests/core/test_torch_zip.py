"""`torch.save` files read without torch (`rlab.core.torch_zip`): the keys and values torch.load gives, NaN/Inf
found in every float dtype, None (torch decides) for anything but a plain file of tensors, and nothing a pickle
names is run."""

from __future__ import annotations

import io
import os
import pickle
import zipfile

import numpy as np
import pytest
import torch

from rlab.core.torch_zip import StoredTensor, read_tensors, state_dict_keys

FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _as_torch(stored: StoredTensor) -> torch.Tensor:
    values = torch.from_numpy(np.array(stored.values))  # a copy: the file's map is read-only
    return values.view(torch.bfloat16) if stored.dtype == "bfloat16" else values


def test_the_keys_and_values_are_torch_loads(tmp_path):
    path = tmp_path / "model_000001.pt"
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    state = {
        "transformer.wte.weight": torch.randn(4, 2).to(torch.bfloat16),
        "lm_head.weight": torch.ones(3, dtype=torch.float16),
        "tied.t": base.t(),  # a view: strides, not its storage's order
        "tied.slice": base[1:3, 2:5],  # an offset into a shared storage
        "steps": torch.tensor([3, 1, 2]),
        "flag": torch.tensor([True, False]),
        "empty": torch.zeros(0, 5),
    }
    torch.save(state, path)
    loaded = torch.load(path, weights_only=True)
    assert state_dict_keys(path) == list(loaded)
    stored = read_tensors(path)
    assert isinstance(stored, dict) and list(stored) == list(loaded)
    for name, tensor in loaded.items():
        assert stored[name].dtype == str(tensor.dtype).removeprefix("torch.")
        assert torch.equal(_as_torch(stored[name]), tensor), name
        assert stored[name].finite()


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_value_is_found_in_every_float_dtype(tmp_path, dtype, bad):
    path = tmp_path / "model.pt"
    weight = torch.zeros(3, 4, dtype=dtype)
    weight[2, 1] = bad
    torch.save({"w": weight, "ok": torch.ones(2, dtype=dtype), "view": weight[:2]}, path)
    stored = read_tensors(path)
    assert isinstance(stored, dict)
    assert [name for name, t in stored.items() if not t.finite()] == ["w"]  # the view leaves the NaN out


def test_one_tensor_file_is_read(tmp_path):
    path = tmp_path / "token_bytes.pt"
    torch.save(torch.tensor([0, 1, 2, 3], dtype=torch.int32), path)
    stored = read_tensors(path)
    assert isinstance(stored, StoredTensor) and stored.numel == 4 and stored.dtype == "int32"


def test_anything_else_is_left_to_torch(tmp_path):
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a zip")
    assert state_dict_keys(garbage) is None and read_tensors(garbage) is None
    assert state_dict_keys(tmp_path / "missing.pt") is None and read_tensors(tmp_path / "missing.pt") is None
    not_tensors = tmp_path / "list.pt"
    torch.save({"a": 1}, not_tensors)
    assert state_dict_keys(not_tensors) is None and read_tensors(not_tensors) is None
    legacy = tmp_path / "legacy.pt"
    torch.save({"a": torch.ones(2)}, legacy, _use_new_zipfile_serialization=False)
    assert read_tensors(legacy) is None


def test_a_damaged_record_is_left_to_torch(tmp_path):
    """A flipped byte in a weight's record: the CRC says so, and torch decides what the file is worth."""
    path = tmp_path / "model.pt"
    torch.save({"w": torch.ones(64)}, path)
    data = bytearray(path.read_bytes())
    at = data.rindex(np.float32(1.0).tobytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    assert read_tensors(path) is None
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(bytes(data[: len(data) // 2]))
    assert read_tensors(truncated) is None


class _Boom:
    def __reduce__(self):

        return (os.system, ("echo should-not-run > /dev/null",))


def test_a_pickle_that_names_a_function_runs_nothing(tmp_path, monkeypatch):

    path = tmp_path / "evil.pt"
    with zipfile.ZipFile(path, "w") as z:
        buffer = io.BytesIO()
        pickle.dump({"x": _Boom()}, buffer)
        z.writestr("archive/data.pkl", buffer.getvalue())
    ran = []
    monkeypatch.setattr(os, "system", lambda *a: ran.append(a))
    assert state_dict_keys(path) is None and read_tensors(path) is None and not ran
