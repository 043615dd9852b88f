"""Every module test writes boot files under a temporary root, never this machine's /etc."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.core import boot_files


@pytest.fixture(autouse=True)
def boot_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "boot-root"
    root.mkdir()
    monkeypatch.setattr(boot_files, "ROOT", str(root))
    return root
