#!/usr/bin/env python3
"""make_torch_bin.py [FOLDER] — writes the small PyTorch .bin checkpoints test_torch_bin reads (default:
tests/data/torch_bin/ beside this script), without torch: the pickle is made by Python's own pickler (protocol 2,
persistent ids), with stand-in classes named as torch names them, so its opcodes are the ones torch.save writes
for a state dict; the ZIP holds ARCHIVE/data.pkl, ARCHIVE/data/KEY and ARCHIVE/version, stored uncompressed.
The refused files are the same layout with a hostile or damaged pickle or archive."""
import collections
import io
import os
import pickle
import struct
import sys
import types
import zipfile

# Stand-ins for the names torch's pickles hold: pickled by name only, never imported by the reader.
torch = types.ModuleType("torch")
torch_utils = types.ModuleType("torch._utils")
sys.modules["torch"], sys.modules["torch._utils"] = torch, torch_utils
for name in ("FloatStorage", "HalfStorage", "BFloat16Storage", "LongStorage"):
    cls = type(name, (), {"__module__": "torch"})
    setattr(torch, name, cls)


def _rebuild_tensor_v2(*args):
    raise AssertionError("never called")


def _rebuild_parameter(*args):
    raise AssertionError("never called")


for function in (_rebuild_tensor_v2, _rebuild_parameter):
    function.__module__ = "torch._utils"
    setattr(torch_utils, function.__name__, function)


class Storage:
    def __init__(self, key, kind, data, element_size):
        self.key, self.kind, self.data, self.numel = key, kind, data, len(data) // element_size


class Tensor:
    def __init__(self, storage, offset, shape, stride=None):
        if stride is None:
            stride, step = [], 1
            for size in reversed(shape):
                stride.insert(0, step)
                step *= size
        self.args = (storage, offset, tuple(shape), tuple(stride), False, collections.OrderedDict())

    def __reduce__(self):
        return (_rebuild_tensor_v2, self.args)


class Parameter:
    def __init__(self, tensor):
        self.tensor = tensor

    def __reduce__(self):
        return (_rebuild_parameter, (self.tensor, True, collections.OrderedDict()))


class TorchPickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", getattr(torch, obj.kind), obj.key, "cpu", obj.numel)
        return None


def state_pickle(state):
    buffer = io.BytesIO()
    TorchPickler(buffer, protocol=2).dump(state)
    return buffer.getvalue()


def write_bin(path, pickled, storages, archive="archive", method=zipfile.ZIP_STORED, byteorder=None):
    with zipfile.ZipFile(path, "w") as z:
        def put(name, data):  # a fixed date, so the files are the same on every run
            info = zipfile.ZipInfo(f"{archive}/{name}", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = method
            z.writestr(info, data)
        put("data.pkl", pickled)
        if byteorder:
            put("byteorder", byteorder)
        for storage in storages:
            put(f"data/{storage.key}", storage.data)
        put("version", "3\n")


def write_zip64(path, source):
    """The entries of the ZIP source again, every size and offset given only in ZIP64 fields (as torch.save
    writes archives over 4 GiB): local and central ZIP64 extras, a ZIP64 end record and its locator."""
    with zipfile.ZipFile(source) as z:
        entries = [(info.filename.encode(), z.read(info)) for info in z.infolist()]
    out, central = bytearray(), bytearray()
    for name, data in entries:
        crc, offset = zipfile.crc32(data), len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 0, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF, len(name), 20)
        out += name + struct.pack("<HHQQ", 1, 16, len(data), len(data)) + data
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 0, 0, 0x21, crc, 0xFFFFFFFF,
                               0xFFFFFFFF, len(name), 28, 0, 0, 0, 0, 0xFFFFFFFF)
        central += name + struct.pack("<HHQQQ", 1, 24, len(data), len(data), offset)
    directory, end = len(out), len(out) + len(central)
    out += central
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, len(entries), len(entries), len(central),
                       directory)
    out += struct.pack("<IIQI", 0x07064B50, 0, end, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    with open(path, "wb") as f:
        f.write(out)
    with zipfile.ZipFile(path) as z:  # Python's reader agrees
        assert [(i.filename.encode(), z.read(i)) for i in z.infolist()] == entries


def half(values):
    return struct.pack(f"<{len(values)}e", *values)


def bfloat16(values):
    return b"".join(struct.pack("<f", v)[2:] for v in values)


# One float16 storage of 10 values viewed by four tensors (two aliases of one [2,3] matrix, a [4] tail at
# offset 6, a scalar at offset 9), a bfloat16 vector, an int64 buffer, a float32 parameter.
HALF_VALUES = [0.5, -1.25, 2.0, 3.5, -0.75, 1024.0, 0.125, -2.5, 65504.0, -0.0]


def good_state():
    shared = Storage("0", "HalfStorage", half(HALF_VALUES), 2)
    brain = Storage("1", "BFloat16Storage", bfloat16([1.5, -3.0, 0.25]), 2)
    ids = Storage("2", "LongStorage", struct.pack("<3q", 0, 1, 2), 8)
    weight = Storage("3", "FloatStorage", struct.pack("<2f", 0.1, -7.0), 4)
    state = collections.OrderedDict()
    state["model.shared.weight"] = Tensor(shared, 0, [2, 3])
    state["model.encoder.embed_tokens.weight"] = Tensor(shared, 0, [2, 3])
    state["model.tail"] = Tensor(shared, 6, [4])
    state["model.scalar"] = Tensor(shared, 9, [])
    state["model.norm.weight"] = Tensor(brain, 0, [3])
    state["model.position_ids"] = Tensor(ids, 0, [1, 3])
    state["model.proj.weight"] = Parameter(Tensor(weight, 0, [2, 1]))
    # an older transformers' state_dict: an OrderedDict whose _metadata attribute pickles as BUILD state
    state._metadata = collections.OrderedDict([("", {"version": 1}), ("model", {"version": 1})])
    return state, [shared, brain, ids, weight]


def tensor_pickle(storage_kind, offset, shape, stride, numel, key="0"):
    storage = Storage(key, storage_kind, b"\0" * (numel * 2), 2)
    return state_pickle({"w": Tensor(storage, offset, shape, stride)}), storage


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                   "torch_bin")
    os.makedirs(folder, exist_ok=True)
    out = lambda name: os.path.join(folder, name)
    state, storages = good_state()
    pickled = state_pickle(state)
    write_bin(out("f16.bin"), pickled, storages, archive="pytorch_model", byteorder="little")
    write_zip64(out("zip64.bin"), out("f16.bin"))

    # sharded: two files and the index naming which holds which tensor
    first = collections.OrderedDict((k, state[k]) for k in ("model.shared.weight", "model.tail"))
    second = collections.OrderedDict((k, state[k]) for k in ("model.norm.weight", "model.proj.weight"))
    write_bin(out("pytorch_model-00001-of-00002.bin"), state_pickle(first), [storages[0]])
    write_bin(out("pytorch_model-00002-of-00002.bin"), state_pickle(second), [storages[1], storages[3]])
    with open(out("pytorch_model.bin.index.json"), "w") as f:
        f.write('{"metadata": {"total_size": 40}, "weight_map": {'
                '"model.shared.weight": "pytorch_model-00001-of-00002.bin", '
                '"model.tail": "pytorch_model-00001-of-00002.bin", '
                '"model.norm.weight": "pytorch_model-00002-of-00002.bin", '
                '"model.proj.weight": "pytorch_model-00002-of-00002.bin"}}\n')

    # refused: each keeps the archive layout and changes one thing
    head = pickled[:2]  # PROTO 2
    bad = {
        "os_system.bin": head + b"cos\nsystem\nX\x02\x00\x00\x00idt\x85R.",
        "posix_system.bin": head + b"cposix\nsystem\nX\x02\x00\x00\x00id\x85R.",
        "builtins_eval.bin": head + b"cbuiltins\neval\nX\x05\x00\x00\x001+1\x00\x85R.",
        "load_from_bytes.bin": head + b"ctorch.storage\n_load_from_bytes\nX\x01\x00\x00\x00x\x85R.",
        "stack_global.bin": b"\x80\x04\x8c\x02os\x8c\x06system\x93X\x02\x00\x00\x00id\x85R.",
        "inst.bin": head + b"(X\x02\x00\x00\x00idios\nsystem\n.",
        "newobj.bin": head + b"ccollections\nOrderedDict\n)\x81.",
        "wrong_args.bin": head + b"}(X\x01\x00\x00\x00wctorch._utils\n_rebuild_tensor_v2\nX\x01\x00\x00\x00x\x85Ru.",
        "storage_call.bin": head + b"ctorch\nFloatStorage\n)R.",
        "memo_range.bin": head + b"}h\x07.",
        "stack_underflow.bin": head + b"}s.",
        "no_stop.bin": pickled[:-1],
        "not_a_dict.bin": head + b"K\x01.",
        # size bombs: marks nested past the limit, a memo index of 2^32 - 1, a string claiming 4 GiB
        "mark_bomb.bin": head + b"(" * 5000 + b"t.",
        "memo_bomb.bin": head + b"}r\xff\xff\xff\xff.",
        "string_bomb.bin": head + b"X\xf0\xff\xff\xff.",
    }
    for name, data in bad.items():
        write_bin(out(name), data, [])
    # a storage too short for its tensor: offset 8 + 4 elements in a storage of 10
    data, storage = tensor_pickle("HalfStorage", 8, [4], [1], 10)
    write_bin(out("offset_past_data.bin"), data, [storage])
    # a declared size of 2^61 elements (the storage holds 4 bytes)
    data, storage = tensor_pickle("HalfStorage", 0, [1 << 31, 1 << 30], [1 << 30, 1], 2)
    write_bin(out("huge_shape.bin"), data, [storage])
    # a storage declared with 2^40 elements (the entry holds 2 bytes)
    storage = Storage("0", "HalfStorage", b"\0\0", 2)
    storage.numel = 1 << 40
    write_bin(out("huge_storage.bin"), state_pickle({"w": Tensor(storage, 0, [1])}), [storage])
    # a transposed view: strides (1, 2) on a [2, 3] matrix
    data, storage = tensor_pickle("HalfStorage", 0, [2, 3], [1, 2], 6)
    write_bin(out("strided.bin"), data, [storage])
    # the storage entry is missing
    write_bin(out("missing_storage.bin"), tensor_pickle("HalfStorage", 0, [2], [1], 2)[0], [])
    # deflated entries, and a file cut short
    write_bin(out("deflated.bin"), pickled, storages, method=zipfile.ZIP_DEFLATED)
    with open(out("f16.bin"), "rb") as f:
        whole = f.read()
    with open(out("truncated.bin"), "wb") as f:
        f.write(whole[: len(whole) // 2])
    # a pickle made by a plain pickle.dumps of the same names (legacy pre-1.6 format starts with the pickle)
    with open(out("legacy.bin"), "wb") as f:
        f.write(pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2))


if __name__ == "__main__":
    main()
