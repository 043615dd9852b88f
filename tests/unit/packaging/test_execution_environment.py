"""The AWX/AAP execution environment definition generates a build context (no image build)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_builder_generates_a_containerfile(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(REPO / "execution-environment.yml", project)
    # the collection tarball ansible-galaxy would build, as the definition expects it
    built = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-galaxy"),
            "collection",
            "build",
            "--output-path",
            str(project / ".gpufleet" / "ee"),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    context = tmp_path / "context"
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-builder"),
            "create",
            "-f",
            "execution-environment.yml",
            "-c",
            str(context),
            "--output-filename",
            "Containerfile",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    containerfile = (context / "Containerfile").read_text()
    assert 'ARG EE_BASE_IMAGE="quay.io/fedora/python-312:latest"' in containerfile
    assert "COPY _build/collection/gpufleet-node-0.1.0.tar.gz /build/gpufleet_node.tar.gz" in containerfile
    assert (context / "_build" / "collection" / "gpufleet-node-0.1.0.tar.gz").is_file()
    requirements = (context / "_build" / "requirements.txt").read_text()
    assert "paramiko>=3.4" in requirements
