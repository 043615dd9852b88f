"""Makes `ansible_collections.gpufleet.node` importable from this checkout; gives every test session's
worker a controller state directory of its own."""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_COLLECTIONS = REPO / ".gpufleet" / "collections"
_LINK = _COLLECTIONS / "ansible_collections" / "gpufleet" / "node"
if not _LINK.exists():
    _LINK.parent.mkdir(parents=True, exist_ok=True)
    _LINK.symlink_to(REPO, target_is_directory=True)
if str(_COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(_COLLECTIONS))
if str(REPO / "src") not in sys.path:
    sys.path.insert(0, str(REPO / "src"))


@pytest.fixture(scope="session", autouse=True)
def _own_state_directory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """What the tests' runs keep as controller state (run locks, kept inventory listings and vault checks,
    the guardian's breaker) goes to a directory of this session's worker, never the user's
    ~/.local/state/gpufleet: unit, integration and conformance alike (the gpufleet commands the tests
    start inherit it); a test that sets GPUFLEET_STATE_DIR itself still does."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GPUFLEET_STATE_DIR", str(tmp_path_factory.mktemp("state")))
        yield
