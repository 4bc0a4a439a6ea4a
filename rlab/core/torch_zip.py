"""`torch.save` files read without importing torch: a state dict's keys, and its tensors as numpy views.

Importing torch takes longer than everything else a dry run does, and a dry run must still say what a launch
would refuse (a model file that does not read, a NaN in a weight, a token table of the wrong size). A file in
torch's zip format is a pickle that names its storages plus one stored (uncompressed) record per storage. This
reader unpickles only what a plain file of tensors holds (an OrderedDict, `torch._utils._rebuild_tensor_v2`,
the typed storage classes) and maps each record with numpy after checking its CRC and size. Anything else (a
legacy non-zip file, a compressed or big-endian record, a class it does not know, a view past its storage)
gives None, and the caller loads the file with torch, which names the problem: never a weaker check.
"""

from __future__ import annotations

import collections
import io
import pickle
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

STORAGE_DTYPES: dict[str, tuple[str, type[np.generic]]] = {
    "FloatStorage": ("float32", np.float32),
    "DoubleStorage": ("float64", np.float64),
    "HalfStorage": ("float16", np.float16),
    "BFloat16Storage": ("bfloat16", np.uint16),  # numpy has no bfloat16: its raw bits
    "LongStorage": ("int64", np.int64),
    "IntStorage": ("int32", np.int32),
    "ShortStorage": ("int16", np.int16),
    "CharStorage": ("int8", np.int8),
    "ByteStorage": ("uint8", np.uint8),
    "BoolStorage": ("bool", np.bool_),
}
"""torch's typed storage class -> (torch dtype name, the numpy dtype of its bytes)."""
BF16_EXPONENT = 0x7F80
"""bfloat16's exponent bits: all set is Inf or NaN."""


@dataclass(frozen=True)
class _StorageType:
    name: str


@dataclass(frozen=True)
class _Storage:
    kind: str
    key: str
    numel: int


@dataclass(frozen=True)
class _TensorRef:
    """What `_rebuild_tensor_v2` names: a view into one storage."""

    storage: _Storage
    offset: int
    size: tuple[int, ...]
    stride: tuple[int, ...]


def _rebuild_tensor_v2(storage: _Storage, offset: int, size: Any, stride: Any, *_: Any) -> _TensorRef:
    return _TensorRef(storage, int(offset), tuple(map(int, size)), tuple(map(int, stride)))


class _Unpickler(pickle.Unpickler):
    """Builds only dicts, tensor references and storage references; any other class stops the read."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild_tensor_v2
        if module == "torch" and name in STORAGE_DTYPES:
            return _StorageType(name)
        raise pickle.UnpicklingError(f"not a plain file of tensors: {module}.{name}")

    def persistent_load(self, pid: Any) -> _Storage:
        kind, storage_type, key, _location, numel = pid
        if kind != "storage" or not isinstance(storage_type, _StorageType):
            raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")
        return _Storage(storage_type.name, str(key), int(numel))


@dataclass(frozen=True)
class StoredTensor:
    """One tensor of a file: its torch dtype and its values (bfloat16: the raw 16 bits)."""

    dtype: str
    values: np.ndarray

    @property
    def floating(self) -> bool:
        return self.dtype in ("float32", "float64", "float16", "bfloat16")

    @property
    def numel(self) -> int:
        return int(self.values.size)

    def finite(self) -> bool:
        """No NaN or Inf (True for integer tensors)."""
        if not self.floating or not self.values.size:
            return True
        if self.dtype == "bfloat16":
            return not bool(((self.values & BF16_EXPONENT) == BF16_EXPONENT).any())
        return bool(np.isfinite(self.values).all())


def _pickle(z: zipfile.ZipFile) -> tuple[str, Any]:
    """(the archive's folder prefix, its unpickled structure)."""
    name = next(n for n in z.namelist() if n.endswith("/data.pkl") or n == "data.pkl")
    return name[: -len("data.pkl")], _Unpickler(io.BytesIO(z.read(name))).load()


def state_dict_keys(path: Path) -> list[str] | None:
    """The keys of a model file in torch's zip format, from its pickle alone (no storage read); None when it is
    not such a file or not a state dict of tensors (the caller then loads it with torch)."""
    try:
        with zipfile.ZipFile(path) as z:
            _, state = _pickle(z)
    except Exception:  # noqa: BLE001 - any failure: torch.load decides, and reports it
        return None
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, _TensorRef) for k, v in state.items()
    ):
        return None
    return list(state)


def read_tensors(path: Path) -> dict[str, StoredTensor] | StoredTensor | None:
    """A state dict (or one tensor) saved by `torch.save`, memory-mapped, every record's CRC checked; None when
    the file is anything but that (see the module docstring)."""
    try:
        with zipfile.ZipFile(path) as z:
            prefix, obj = _pickle(z)
            order = (
                z.read(prefix + "byteorder").decode() if prefix + "byteorder" in z.namelist() else "little"
            )
            if order != "little":
                return None
            arrays: dict[str, np.ndarray] = {}

            def tensor(ref: _TensorRef) -> StoredTensor:
                storage = ref.storage
                if storage.key not in arrays:
                    arrays[storage.key] = _record(path, z.getinfo(f"{prefix}data/{storage.key}"), storage)
                return StoredTensor(STORAGE_DTYPES[storage.kind][0], _view(arrays[storage.key], ref))

            if isinstance(obj, _TensorRef):
                return tensor(obj)
            if not isinstance(obj, dict) or not all(
                isinstance(k, str) and isinstance(v, _TensorRef) for k, v in obj.items()
            ):
                return None
            return {k: tensor(v) for k, v in obj.items()}
    except Exception:  # noqa: BLE001 - any failure: torch.load decides, and reports it
        return None


def _record(path: Path, info: zipfile.ZipInfo, storage: _Storage) -> np.ndarray:
    """A storage's record as a read-only array over the file (stored, of its size, its CRC right)."""
    dtype = np.dtype(STORAGE_DTYPES[storage.kind][1])
    if info.compress_type != zipfile.ZIP_STORED or info.file_size != storage.numel * dtype.itemsize:
        raise ValueError(f"{info.filename}: not a stored record of {storage.numel} {dtype}")
    if storage.numel == 0:
        return np.empty(0, dtype)
    with open(path, "rb") as fh:
        fh.seek(info.header_offset)
        header = fh.read(30)  # the local file header; its name and extra field lengths sit at bytes 26-29
    start = (
        info.header_offset
        + 30
        + int.from_bytes(header[26:28], "little")
        + int.from_bytes(header[28:30], "little")
    )
    data = np.memmap(path, dtype=dtype, mode="r", offset=start, shape=(storage.numel,))
    if zlib.crc32(data.data) != info.CRC:
        raise ValueError(f"{info.filename}: CRC mismatch")
    return data


def _view(data: np.ndarray, ref: _TensorRef) -> np.ndarray:
    """The tensor's elements in its storage, after checking the view stays inside it."""
    if len(ref.size) != len(ref.stride) or ref.offset < 0 or min(ref.stride, default=0) < 0:
        raise ValueError("malformed view")
    if 0 in ref.size:
        return np.empty(ref.size, data.dtype)
    last = ref.offset + sum((n - 1) * s for n, s in zip(ref.size, ref.stride, strict=True))
    if last >= data.size:
        raise ValueError("view past its storage")
    strides = tuple(s * data.itemsize for s in ref.stride)
    return np.lib.stride_tricks.as_strided(
        data[ref.offset :], shape=ref.size, strides=strides, writeable=False
    )
