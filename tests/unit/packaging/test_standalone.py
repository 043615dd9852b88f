"""The repository stands alone: a clone of it, with no sibling folders, is the whole project."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
# the sibling folder the project once read (spelt in two parts so that this file does not name it)
OUTSIDE = "../" + "shared"


def _tracked() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    return [REPO / name for name in listed.decode().split("\0") if name]


def test_the_file_list_is_the_project() -> None:
    names = {p.relative_to(REPO).as_posix() for p in _tracked()}
    assert {"Makefile", "README.md", "galaxy.yml", "tests/fixtures/real/INDEX.md"} <= names


def test_nothing_refers_to_a_folder_beside_the_repository() -> None:
    naming = []
    for path in _tracked():
        if path.is_symlink() or not path.is_file():
            continue
        text = path.read_bytes()
        if OUTSIDE.encode() in text:
            naming.append(path.relative_to(REPO).as_posix())
    assert naming == []
