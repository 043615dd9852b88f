"""A simulated node's Python keeps the bytecode of what it imports from zip archives.

Ansible runs every module from a fresh zip (AnsiballZ) and ``zipimport`` keeps no bytecode, so each
module run compiles ansible's module_utils and gpufleet's again: ~0.3 of a run's ~0.5 CPU-s on this
machine, and half of the integration tests' CPU (32 simulated nodes share 2 cores). A real node
pays the same ~0.3 s per module run on one of its hundred cores and nobody notices. Here, the code
compiled from a file's exact bytes is kept under a key of those bytes (and the interpreter's magic
number) and the same code object, its file name set to the new archive's, is used again: what runs
is what compiling the source gives. Anything unexpected falls back to zipimport's own compile.

The sim's sshd puts this directory on a node session's PYTHONPATH (node.py); nothing on the
controller or in gpufleet's code sees it.
"""

from __future__ import annotations

import _imp
import hashlib
import importlib.util
import marshal
import os
import sys
import tempfile
import types
import zipimport

_CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__", "zipped")


def _compiled(source: bytes, filename: str) -> types.CodeType:
    key = hashlib.sha256(importlib.util.MAGIC_NUMBER + source).hexdigest()
    path = os.path.join(_CACHE, key)
    try:
        with open(path, "rb") as kept:
            code = marshal.load(kept)
        if not isinstance(code, types.CodeType):
            raise TypeError(path)
        _imp._fix_co_filename(code, filename)  # type: ignore[attr-defined]  # this run's archive
        return code
    except (OSError, EOFError, ValueError, TypeError):
        pass
    # zipimport's own compile: universal newlines, nothing inherited from this file.
    text = source.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    code = compile(text, filename, "exec", dont_inherit=True)
    try:
        os.makedirs(_CACHE, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=_CACHE)
        with os.fdopen(fd, "wb") as out:
            marshal.dump(code, out)
        os.replace(temporary, path)  # whole or absent: nodes write the same key at once
    except OSError:
        pass
    return code


class _KeptZipImporter(zipimport.zipimporter):
    def _source(self, fullname: str) -> tuple[str, bytes] | None:
        """The module's source file in the archive and its bytes, or None where it has only bytecode or
        is absent."""
        name = fullname.rpartition(".")[2]
        try:
            relative = self.prefix + name + ("/__init__.py" if self.is_package(fullname) else ".py")
        except ImportError:
            return None
        filename = self.archive + os.sep + relative
        try:
            return filename, self.get_data(filename)
        except OSError:
            return None

    def get_filename(self, fullname: str) -> str:
        # zipimport's own compiles the module to learn its name (find_spec asks for it): twice per import
        # without this.
        found = self._source(fullname)
        return found[0] if found else super().get_filename(fullname)

    def get_code(self, fullname: str) -> types.CodeType:
        found = self._source(fullname)
        if found is None:
            return super().get_code(fullname)
        filename, source = found
        return _compiled(source, filename)


def _install() -> None:
    hooks = sys.path_hooks
    for index, hook in enumerate(hooks):
        if hook is zipimport.zipimporter:
            hooks[index] = _KeptZipImporter
            sys.path_importer_cache.clear()
            return


_install()
