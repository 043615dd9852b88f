"""Makes `ansible_collections.gpufleet.node` importable from this checkout."""

import sys
from pathlib import Path

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
