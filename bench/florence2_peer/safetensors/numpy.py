"""safetensors.numpy stand-in (see safetensors/__init__.py): reading only."""
import numpy as np

_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
           "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def _to_numpy(data, dtype, shape):
    return np.frombuffer(data, dtype=_DTYPES[dtype]).reshape(shape).copy()


def load_file(filename):
    from . import safe_open
    with safe_open(filename, framework="np") as f:
        return {name: f.get_tensor(name) for name in f.keys()}
