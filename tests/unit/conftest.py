"""Shared unit-test fixtures: where the real tool captures live."""

import os
from pathlib import Path

import pytest

# tests/fixtures/real: the real captures, copied into the project with their provenance (INDEX.md);
# GPUFLEET_FIXTURES points elsewhere.
_DEFAULT_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    path = Path(os.environ.get("GPUFLEET_FIXTURES") or _DEFAULT_FIXTURES)
    if not path.is_dir():
        pytest.fail(f"real captures not found at {path}; set GPUFLEET_FIXTURES")
    return path


@pytest.fixture(scope="session")
def read_fixture(fixtures_dir):
    """read_fixture('topo-matrix/x.txt') -> the capture's text, exactly as stored."""

    def read(relpath: str) -> str:
        # newline="" keeps the bytes as captured (tabs, trailing blanks, any CR).
        with (fixtures_dir / relpath).open(encoding="utf-8", newline="") as handle:
            return handle.read()

    return read
