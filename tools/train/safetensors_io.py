"""safetensors_io.py — read and write safetensors files with numpy only
(Debian has no safetensors package). Used by the demo-model training tools;
the runtime has its own reader in weights/safetensors.c."""
import json
import struct

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}
NAMES = {np.dtype(v): k for k, v in DTYPES.items()}


def load(path):
    """All tensors of a file as a dict name -> numpy array (BF16 is widened)."""
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    base = 8 + length
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = data[base + begin : base + end]
        if entry["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
            array = bits.view(np.float32)
        else:
            array = np.frombuffer(raw, dtype=DTYPES[entry["dtype"]])
        tensors[name] = array.reshape(entry["shape"]).copy()
    return tensors


def save(path, tensors, metadata=None):
    """Writes name -> numpy array in sorted order, header padded to 8 bytes."""
    header = {"__metadata__": metadata or {"format": "pt"}}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        array = np.asarray(tensors[name])
        if not array.flags.c_contiguous:  # (np.ascontiguousarray would turn a scalar into shape [1])
            array = array.copy(order="C")
        raw = array.tobytes()
        header[name] = {
            "dtype": NAMES[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)
