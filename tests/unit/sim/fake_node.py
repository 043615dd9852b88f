"""Simulated nodes for the fake-tool tests: each test works on a copy of a node built once per
profile (a module-scoped fixture of the test file, named ``templates`` here), and runs a tool in-process
the way its wrapper on the node does."""

from __future__ import annotations

import contextlib
import io
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gpufleet_sim import build, state, sysfs


def node_state_dir(tmp_path: Path, index: int, profile: str = "b300-16") -> Path:
    """A node's directory (named after it, its hostname: node<index>) holding only its built state."""
    name = f"node{index:02d}"
    directory = tmp_path / name
    directory.mkdir()
    state.save(directory, build.build_node_state(name, profile, index))
    return directory


def build_nodes(
    tmp_path_factory: pytest.TempPathFactory, profiles: tuple[str, ...], *more: Callable[[Path, Any], None]
) -> dict[str, Path]:
    """Each profile's node (its state and sysfs, then each of ``more`` given the sysfs root and the state)
    built once in a directory of its own: a test file's ``templates`` fixture."""
    out = {}
    for profile in profiles:
        path = tmp_path_factory.mktemp(profile)
        node_state = build.build_node_state("node01", profile, 1)
        state.save(path, node_state)
        sysfs.render(path / "sys", node_state)
        for render in more:
            render(path / "sys", node_state)
        out[profile] = path
    return out


def copy_node(templates: dict[str, Path], target: Path, profile: str, inside: str = ".") -> Path:
    """A copy of ``profile``'s template at ``target``; the node's directory (``inside`` it)."""
    shutil.copytree(templates[profile], target, symlinks=True)
    return target / inside


def node_fixture(profile: str, templates: str, inside: str = ".") -> Callable[..., Path]:
    """A fixture giving each test its own copy of ``profile``'s node, from the test file's fixture
    named ``templates`` (profile -> the directory built once)."""

    @pytest.fixture
    def copied(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
        return copy_node(request.getfixturevalue(templates), tmp_path / profile, profile, inside)

    return copied


def run(tool: Any, node_dir: Path, *argv: str) -> tuple[int, str, str]:
    """The tool's main() on the node: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = tool.main(list(argv), node_dir)
    return rc, out.getvalue(), err.getvalue()


def smi(node_dir: Path, *argv: str) -> str:
    """The fake nvidia-smi's output on the node, which must succeed."""
    from gpufleet_sim.tools import nvidia_smi

    rc, out, _ = run(nvidia_smi, node_dir, *argv)
    assert rc == 0, out
    return out
