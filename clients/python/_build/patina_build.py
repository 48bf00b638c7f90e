"""An in-tree PEP 517 build backend, standard library only.

The package is pure Python with no dependencies, so its wheel is a zip of
src/patina plus metadata. With no build requirement at all it installs
offline everywhere, with or without build isolation, in a fresh venv that
has no setuptools or wheel:

    pip install --no-index --no-build-isolation ./clients/python
"""

import base64
import hashlib
import io
import os
import tarfile
import zipfile

NAME = "patina_client"
DIST = "patina-client"
VERSION = "0.1.0"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
TAG = "py3-none-any"


def _metadata():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return (
        "Metadata-Version: 2.1\n"
        "Name: %s\n"
        "Version: %s\n"
        "Summary: Python client of patina's sidecar API: isolated, persistent workspaces for AI coding agents\n"
        "Requires-Python: >=3.9\n"
        "Classifier: Programming Language :: Python :: 3\n"
        "Classifier: Typing :: Typed\n"
        "Description-Content-Type: text/markdown\n\n%s" % (DIST, VERSION, readme)
    )


def _files():
    pkg = os.path.join(SRC, "patina")
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py") or name == "py.typed":
            yield "patina/" + name, os.path.join(pkg, name)


def _wheel(directory, entries):
    info = "%s-%s.dist-info" % (NAME, VERSION)
    name = "%s-%s-%s.whl" % (NAME, VERSION, TAG)
    record = []
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        def add(arc, data):
            z.writestr(arc, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (arc, digest, len(data)))

        for arc, data in entries:
            add(arc, data)
        add(info + "/METADATA", _metadata().encode("utf-8"))
        add(info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: patina_build\nRoot-Is-Purelib: true\nTag: %s\n" % TAG).encode())
        add(info + "/top_level.txt", b"patina\n")
        record.append(info + "/RECORD,,")
        z.writestr(info + "/RECORD", "\n".join(record) + "\n")
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    entries = []
    for arc, path in _files():
        with open(path, "rb") as f:
            entries.append((arc, f.read()))
    return _wheel(wheel_directory, entries)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, [("patina_client.pth", (SRC + "\n").encode("utf-8"))])


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, VERSION)
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ("pyproject.toml", "README.md", "_build/patina_build.py"):
            t.add(os.path.join(ROOT, rel), base + "/" + rel)
        for arc, path in _files():
            t.add(path, base + "/src/" + arc)
        pkg_info = _metadata().encode("utf-8")
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size = len(pkg_info)
        t.addfile(ti, io.BytesIO(pkg_info))
    return name
