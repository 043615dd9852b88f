"""The unit tests mirror the code: a module_utils test sits in the folder of its domain."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CODE = REPO / "plugins" / "module_utils"
TESTS = REPO / "tests" / "unit" / "module_utils"


def test_no_module_utils_test_outside_a_domain_folder() -> None:
    assert sorted(p.name for p in TESTS.glob("test_*.py")) == []


def test_every_test_folder_is_a_domain_of_the_code() -> None:
    domains = {p.name for p in CODE.iterdir() if (p / "__init__.py").is_file()}
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
    assert len(domains) >= 8 and folders <= domains, folders - domains


def test_a_test_named_after_a_module_sits_in_that_modules_domain() -> None:
    """test_nvidia_smi.py beside gpu/nvidia_smi.py: a test named after a module is in its domain."""
    where = {p.stem: p.parent.name for p in CODE.glob("*/*.py") if p.stem != "__init__"}
    misplaced = {
        str(t.relative_to(TESTS)): where[t.stem.removeprefix("test_")]
        for t in TESTS.glob("*/test_*.py")
        if t.stem.removeprefix("test_") in where and t.parent.name != where[t.stem.removeprefix("test_")]
    }
    assert misplaced == {}
