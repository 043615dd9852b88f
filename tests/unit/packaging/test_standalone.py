"""The repository stands alone: a clone of it, with no sibling folders, is the whole project."""

from __future__ import annotations

import re
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


def test_the_readme_is_a_front_door() -> None:
    """Quick start first, a picture of report.html that exists, and every command in the table."""
    from tests.unit.test_cli_help import COMMANDS  # the commands, from the parser itself

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", readme, flags=re.MULTILINE)
    assert headings[:3] == ["Quick start", "The commands", "Pointing it at a real fleet"], headings
    assert readme.index("make demo") < readme.index("make test") < readme.index("## The commands")
    pictures = re.findall(r"!\[[^\]]+\]\(([^)]+)\)", readme)
    assert pictures and all((REPO / p).is_file() and (REPO / p).stat().st_size > 10_000 for p in pictures)
    table = readme[readme.index("## The commands") : readme.index("## Pointing it at a real fleet")]
    tops = {c[0] for c in COMMANDS if len(c) == 1}
    assert tops and all(f"`gpufleet {name}" in table for name in tops), tops


def test_the_docs_index_names_every_page() -> None:
    index = (REPO / "docs" / "README.md").read_text(encoding="utf-8")
    pages = sorted(p.name for p in (REPO / "docs").glob("*.md") if p.name != "README.md")
    assert pages and all(f"]({name})" in index for name in pages), pages
    for target in re.findall(r"\]\(([^)]+)\)", index):
        assert (REPO / "docs" / target).resolve().is_file(), target
