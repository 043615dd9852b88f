# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Keep the AnsiballZ payloads ansible-core builds for gpufleet's modules from one run to the next.

ansible-core builds a module's payload (the module and every module_util it imports, found by
parsing each file's AST) once per run, in a cache inside the run's own local temporary directory,
which it deletes when the run ends. For gpufleet's ~25 modules that is ~10 CPU-s of every gate,
whatever the fleet's size (py-spy: ~35 % of the workers' samples on a two-node gate). This callback
fills the run's cache from a persistent one at the start and keeps what the run built at the end.

The persistent cache sits beside ansible's own local temporary directories (``local_tmp``, mode
0700, owned by the user) in a folder named by a digest of what a payload is built from: the
ansible-core version and install path, the collection's path, and the content of its modules and
module_utils. A changed file is a new folder (one unused for an hour is removed): a stale payload
is never sent. Only gpufleet's own modules and ansible-core's are kept.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: payload_cache
type: aggregate
short_description: Keep the AnsiballZ payloads of gpufleet's modules between runs
description:
  - ansible-core builds every module's AnsiballZ payload again in each run, in a cache it deletes
    when the run ends (about 10 CPU-s of a gate, whatever the fleet's size). This callback fills the
    run's cache from a persistent one when the playbook starts and keeps what the run built when it
    ends.
  - The persistent cache is a folder beside ansible's C(local_tmp), private to the user, named by a
    digest of the ansible-core version and of gpufleet's modules and module_utils; a changed file
    gets a new folder, and one no run has used for an hour is removed.
  - It changes nothing a playbook does or prints. gpufleet's C(ansible.cfg) enables it.
requirements:
  - enabled in C(callbacks_enabled) (gpufleet's C(ansible.cfg) does it)
"""

import hashlib
import os
import shutil
import stat
import time
from pathlib import Path

import ansible
from ansible import constants as C
from ansible.plugins.callback import CallbackBase
from ansible.release import __version__ as ANSIBLE_VERSION

COLLECTION_ROOT = Path(__file__).resolve().parents[2]
# The payloads kept: gpufleet's modules and ansible-core's (whose content the version names).
KEPT_PREFIXES = ("ansible_collections.gpufleet.node.", "ansible.modules.")
FOLDER = "gpufleet-ansiballz"
# A folder no run has used for this long is another version's: removed (not sooner, so that two
# checkouts used side by side do not remove each other's).
STALE_SECONDS = 3600


def content_key(root: Path = COLLECTION_ROOT) -> str:
    """A digest of everything a kept payload is built from."""
    digest = hashlib.sha256(f"{ANSIBLE_VERSION}\0{Path(ansible.__file__).parent}\0{root}\0".encode())
    sources = sorted((root / "plugins" / "modules").glob("*.py"))
    sources += sorted((root / "plugins" / "module_utils").rglob("*.py"))
    for path in sources:
        digest.update(f"{path.relative_to(root)}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:24]


def private_folder(path: Path) -> bool:
    """Made (0700) if missing; True only for a folder of this user's that nobody else can write to."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.lstat()
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.geteuid()
        and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def kept(name: str) -> bool:
    return name.startswith(KEPT_PREFIXES) and not name.endswith(("-part", ".lock"))


def remove_stale(base: Path, store: Path) -> None:
    now = time.time()
    for old in base.iterdir():
        try:
            if old != store and now - old.stat().st_mtime > STALE_SECONDS:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            continue  # another run removed it first


def link_or_copy(source: Path, target: Path) -> None:
    """A hard link where it can (the file survives the other name's removal), else a copy; written
    under a temporary name first, so a reader never sees half a file."""
    part = target.with_name(f".{target.name}.{os.getpid()}")
    try:
        os.link(source, part)
    except OSError:
        shutil.copyfile(source, part)
    os.replace(part, target)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpufleet.node.payload_cache"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._store: Path | None = None
        self._run_cache = Path(C.DEFAULT_LOCAL_TMP) / "ansiballz_cache"

    def v2_playbook_on_start(self, playbook):
        try:
            base = Path(C.DEFAULT_LOCAL_TMP).parent / FOLDER
            store = base / content_key()
            if not (private_folder(base) and private_folder(store)):
                self._display.warning(f"payload_cache: {base} is not private to this user; not used")
                return
            os.utime(store)
            remove_stale(base, store)
            self._run_cache.mkdir(mode=0o700, parents=True, exist_ok=True)
            for entry in store.iterdir():
                if kept(entry.name) and not (self._run_cache / entry.name).exists():
                    link_or_copy(entry, self._run_cache / entry.name)
            self._store = store
        except OSError as err:
            # A cache that cannot be read or written costs time, never the run.
            self._display.warning(f"payload_cache: not used: {err}")

    def v2_playbook_on_stats(self, stats):
        if self._store is None or not self._run_cache.is_dir():
            return
        try:
            for entry in self._run_cache.iterdir():
                if kept(entry.name) and not (self._store / entry.name).exists():
                    link_or_copy(entry, self._store / entry.name)
        except OSError as err:
            self._display.warning(f"payload_cache: payloads not kept: {err}")
