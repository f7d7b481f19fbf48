"""setup.py — only so that building the package writes nothing into the source folder: setuptools would put
its build/ and glimpse.egg-info/ beside pyproject.toml (pip builds in place), so both go to a temporary folder,
removed when the build ends. The package's metadata is pyproject.toml's."""
import atexit
import shutil
import tempfile

import setuptools

scratch = tempfile.mkdtemp(prefix="glimpse-build-")
atexit.register(shutil.rmtree, scratch, True)
setuptools.setup(options={"build": {"build_base": scratch}, "egg_info": {"egg_base": scratch}})
