"""conftest.py — where the Python binding's tests find their inputs: the source tree (python/..), the
build (GLIMPSE_BUILD_DIR, default build/: the glimpse CLI whose output the binding must equal, and
libglimpse.so.0 unless GLIMPSE_LIBRARY says otherwise) and the reference fixtures (GLIMPSE_FIXTURES)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SOURCE = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("GLIMPSE_BUILD_DIR", SOURCE / "build"))
FIXTURES = Path(os.environ.get("GLIMPSE_FIXTURES", SOURCE.parent / "shared" / "fixtures"))
PICTURES = SOURCE / "examples" / "pictures"
DEMO_CLIP = SOURCE / "examples" / "models" / "demo-clip"
DEMO_CAPTION = SOURCE / "examples" / "models" / "demo-blip-caption"

os.environ.setdefault("GLIMPSE_LIBRARY", str(BUILD / "libglimpse.so.0"))
sys.path.insert(0, str(SOURCE / "python"))


def glimpse_cli(*arguments):
    """Runs the glimpse program of this build; its stdout's JSON lines."""
    done = subprocess.run([str(BUILD / "glimpse"), *map(str, arguments)], capture_output=True, text=True,
                          check=True)
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def read_safetensors(path):
    """The tensors of a safetensors file (float32 only, which is what the fixtures' references hold)."""
    data = Path(path).read_bytes()
    header_size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + header_size])
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] == "F32", name
        begin, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(data[8 + header_size + begin:8 + header_size + end],
                                      dtype="<f4").reshape(entry["shape"])
    return tensors


def fixture(name):
    folder = FIXTURES / name
    if not (folder / "expected.json").is_file():
        pytest.skip(f"the reference fixtures are not at {FIXTURES} (set GLIMPSE_FIXTURES)")
    return folder


@pytest.fixture(scope="session")
def demo_clip():
    import glimpse
    return glimpse.Model(DEMO_CLIP)


@pytest.fixture(scope="session")
def demo_caption():
    import glimpse
    return glimpse.Model(DEMO_CAPTION)


@pytest.fixture(scope="session")
def pictures():
    return sorted(str(path) for path in PICTURES.glob("*.png"))
