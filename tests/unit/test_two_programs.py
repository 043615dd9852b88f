"""Two programs, two distributions: gpufleet (the operator's tool) never imports the simulator
(gpufleet_sim, sim/), which drives gpufleet as an operator would."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONTROLLER = REPO / "src" / "gpufleet"
SIMULATOR = REPO / "sim" / "src" / "gpufleet_sim"


def _imported(path: Path) -> set[str]:
    """Every module a file imports, at any depth of its code (function-level imports too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_controller_imports_nothing_of_the_simulator() -> None:
    files = sorted(CONTROLLER.rglob("*.py"))
    assert len(files) > 20  # the walk found the package
    offenders = {
        str(f.relative_to(REPO)): sorted(n for n in _imported(f) if n.split(".")[0] == "gpufleet_sim")
        for f in files
    }
    assert {f: names for f, names in offenders.items() if names} == {}


def test_the_simulator_is_not_in_the_controllers_package() -> None:
    assert not (CONTROLLER / "sim").exists()
    assert (SIMULATOR / "__init__.py").is_file()


def test_the_simulator_imports_the_controller_and_not_the_reverse() -> None:
    """The one direction there is: the simulator's demo runs gpufleet's commands."""
    uses = {
        f.name for f in SIMULATOR.rglob("*.py") if any(n.split(".")[0] == "gpufleet" for n in _imported(f))
    }
    assert "cli.py" in uses


def test_gpufleet_help_loads_no_module_of_the_simulator() -> None:
    code = "import sys; from gpufleet import cli; sys.argv = ['gpufleet', '--help']\n"
    code += "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
    code += "print(sorted(m for m in sys.modules if m.split('.')[0] == 'gpufleet_sim'))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert "usage: gpufleet" in done.stdout


def test_the_operators_wheel_holds_no_simulator() -> None:
    """The controller's project packages gpufleet only; the simulator's its own (sim/pyproject.toml)."""
    import tomllib

    controller = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    simulator = tomllib.loads((REPO / "sim" / "pyproject.toml").read_text(encoding="utf-8"))
    assert controller["tool"]["setuptools"]["packages"]["find"]["include"] == ["gpufleet", "gpufleet.*"]
    assert "gpufleet-sim" not in controller["project"]["scripts"]
    assert simulator["project"]["scripts"] == {"gpufleet-sim": "gpufleet_sim.cli:main"}
    assert any(dep.startswith("gpufleet==") for dep in simulator["project"]["dependencies"])
