"""safetensors.torch stand-in (see safetensors/__init__.py): load_file, save_file, load, save, storage_ptr,
storage_size."""
import json
import os
import struct

import torch

from . import safe_open

_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool,
}
_NAMES = {dtype: name for name, dtype in _DTYPES.items()}


def _to_torch(data, dtype, shape):
    if not data:
        return torch.empty(shape, dtype=_DTYPES[dtype])
    return torch.frombuffer(bytearray(data), dtype=_DTYPES[dtype]).reshape(shape).clone()


def load_file(filename, device="cpu"):
    with safe_open(filename, framework="pt") as f:
        return {name: f.get_tensor(name).to(device) for name in f.keys()}


def _tensor_bytes(tensor):
    tensor = tensor.detach().to("cpu").contiguous()
    if tensor.numel() == 0:
        return b""
    return tensor.reshape(-1).view(torch.uint8).numpy().tobytes()


def save(tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        tensor = tensors[name]
        data = _tensor_bytes(tensor)
        header[name] = {"dtype": _NAMES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def save_file(tensors, filename, metadata=None):
    data = save(tensors, metadata)
    with open(os.fspath(filename), "wb") as f:
        f.write(data)


def load(data):
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    header.pop("__metadata__", None)
    start = 8 + length
    out = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        out[name] = _to_torch(data[start + begin:start + end], entry["dtype"], entry["shape"])
    return out


def storage_ptr(tensor):
    try:
        return tensor.untyped_storage().data_ptr()
    except Exception:
        try:
            return tensor.storage().data_ptr()
        except NotImplementedError:
            return 0


def storage_size(tensor):
    try:
        return tensor.untyped_storage().nbytes()
    except AttributeError:
        try:
            return tensor.storage().size() * tensor.element_size()
        except NotImplementedError:
            return tensor.nelement() * tensor.element_size()
