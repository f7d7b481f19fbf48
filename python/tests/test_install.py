"""test_install.py — `pip install ./python` installs the package and writes nothing into the folder it is
installed from (setuptools put build/ and glimpse.egg-info/ there; issue 35). Run on a copy of the folder,
offline, with the pip of the python running the tests; skipped without pip."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import SOURCE


def test_pip_install_leaves_the_folder_as_it_was(tmp_path):
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode != 0:
        pytest.skip("no pip for this python")
    folder = tmp_path / "python"
    shutil.copytree(SOURCE / "python", folder, ignore=shutil.ignore_patterns("tests", "__pycache__", "build",
                                                                            "*.egg-info"))
    before = sorted(os.listdir(folder))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-deps",
                           "--target", str(tmp_path / "installed"), str(folder)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "installed" / "glimpse" / "__init__.py").is_file()
    assert sorted(os.listdir(folder)) == before
