"""A pure-Python stand-in for the parts of `safetensors` that transformers 4.40.2 touches when it loads and saves
PyTorch models (Debian 12 has no safetensors package): safe_open for reading, and safetensors.torch's load_file,
save_file, load, save, storage_ptr and storage_size. The file format: an 8-byte little-endian header length, a JSON
header {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the tensors' bytes.
Written for glimpse's Florence-2 peer (bench/florence2_peer_setup.sh); not the safetensors project's code."""
import json
import struct

__version__ = "0.4.3"


def _read_header(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    return header, 8 + length


class safe_open:
    """with safe_open(path, framework="pt") as f: f.keys(), f.get_tensor(name), f.metadata()"""

    def __init__(self, filename, framework="pt", device="cpu"):
        if framework not in ("pt", "torch", "numpy", "np"):
            raise ValueError(f"safetensors stand-in: framework {framework!r} is not supported")
        self._path = str(filename)
        self._framework = framework
        header, self._start = _read_header(self._path)
        self._metadata = header.pop("__metadata__", None)
        self._header = header

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def keys(self):
        return list(self._header.keys())

    def metadata(self):
        return self._metadata

    def _bytes(self, name):
        begin, end = self._header[name]["data_offsets"]
        with open(self._path, "rb") as f:
            f.seek(self._start + begin)
            return f.read(end - begin)

    def get_tensor(self, name):
        entry = self._header[name]
        data = self._bytes(name)
        if self._framework in ("numpy", "np"):
            from .numpy import _to_numpy
            return _to_numpy(data, entry["dtype"], entry["shape"])
        from .torch import _to_torch
        return _to_torch(data, entry["dtype"], entry["shape"])

    def get_slice(self, name):
        return _Slice(self, name)


class _Slice:
    def __init__(self, owner, name):
        self._owner, self._name = owner, name

    def get_shape(self):
        return list(self._owner._header[self._name]["shape"])

    def get_dtype(self):
        return self._owner._header[self._name]["dtype"]

    def __getitem__(self, index):
        return self._owner.get_tensor(self._name)[index]


class SafetensorError(Exception):
    pass
