"""The unit tests mirror the code: a module_utils test sits in the folder of its domain."""

from __future__ import annotations

import re
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


# ------------------------------------------------------------------ names say the layer
# plugins/module_utils/README.md states the vocabulary ("Names say the layer") and lists every file
# under its layers ("Which file is which"); these hold the tree to both.

README = CODE / "README.md"
COLUMNS = ("parsers", "readers", "judges", "role logic")
# A name's last word that says its layer, and the README column it must then be listed in.
LAYER_WORDS = {
    "_parse": "parsers",
    "_read": "readers",
    "_reading": "readers",
    "_judge": "judges",
    "_verdict": "judges",
    "_roles": "role logic",
}
# Last words that say no layer at all (gpu_desired, gpu_apply, fabric_path were such names).
NO_LAYER_WORDS = ("_desired", "_apply", "_path", "_util", "_utils", "_common", "_helpers", "_misc", "_base")


def _roles() -> set[str]:
    """The roles with a module of their own name: their module_utils file is that role's logic."""
    modules = {p.stem for p in (REPO / "plugins" / "modules").glob("*.py")}
    return {p.name for p in (REPO / "roles").iterdir() if p.is_dir() and p.name in modules}


def _table() -> dict[str, dict[str, set[str]]]:
    """README's "Which file is which": domain -> column -> the file names listed in that cell."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Which file is which", 1)[1].split("\n## ", 1)[0]
    rows = [
        line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| domain")
    ]
    table = {}
    for row in rows:
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        table[cells[0]] = {
            column: set(re.findall(r"`([a-z0-9_]+\.py)`", cell))
            for column, cell in zip(COLUMNS, cells[1:], strict=True)
        }
    return table


def _code_files() -> dict[str, set[str]]:
    return {
        domain.name: {p.name for p in domain.glob("*.py") if p.name != "__init__.py"}
        for domain in CODE.iterdir()
        if (domain / "__init__.py").is_file()
    }


def name_faults(domain: str, name: str, listed: dict[str, set[str]], roles: set[str]) -> list[str]:
    """What is wrong with module_utils/<domain>/<name> against the vocabulary; [] when nothing."""
    stem = name.removesuffix(".py")
    faults = []
    if stem == domain and stem not in roles:
        faults.append("named after its domain alone, which says no layer")
    faults.extend(f"ends in {word!r}, which says no layer" for word in NO_LAYER_WORDS if stem.endswith(word))
    for word, column in LAYER_WORDS.items():
        if stem.endswith(word) and name not in listed.get(column, set()):
            faults.append(f"its name says {column}, the README lists it elsewhere")
    if stem in roles and name not in listed.get("role logic", set()):
        faults.append(f"named after role {stem}, not listed as role logic")
    if not any(name in files for files in listed.values()):
        faults.append("not listed in README.md's table")
    return faults


def test_every_module_utils_name_follows_the_vocabulary() -> None:
    table, roles = _table(), _roles()
    faults = {
        f"{domain}/{name}": name_faults(domain, name, table.get(domain, {}), roles)
        for domain, names in _code_files().items()
        for name in sorted(names)
    }
    assert {where: why for where, why in faults.items() if why} == {}


def test_the_readme_table_lists_only_files_that_exist() -> None:
    code = _code_files()
    table = _table()
    assert set(table) == set(code)
    gone = {
        f"{domain}: {name}"
        for domain, columns in table.items()
        for names in columns.values()
        for name in names
        if name not in code[domain]
    }
    assert gone == set()


def test_names_that_hide_their_layer_are_refused() -> None:
    """The rule catches the names this tree had before the renames (it would fail on them)."""
    roles = _roles()
    listed = {
        "parsers": {"rdma.py"},
        "judges": {"gpu_desired.py", "fabric_path.py"},
        "role logic": {"gpu_apply.py"},
    }
    assert name_faults("rdma", "rdma.py", listed, roles)
    assert name_faults("gpu", "gpu_desired.py", listed, roles)
    assert name_faults("gpu", "gpu_apply.py", listed, roles)
    assert name_faults("fabric", "fabric_path.py", listed, roles)
    assert name_faults(
        "gpu", "gpu_judge.py", {"role logic": {"gpu_judge.py"}}, roles
    )  # listed in the wrong layer
    assert name_faults("gpu", "new_thing.py", {}, roles)  # in no layer of the table
    assert name_faults(
        "gpu", "gpu_power.py", {"judges": {"gpu_power.py"}}, roles
    )  # a role's file is role logic
    assert name_faults("gpu", "gpu_judge.py", {"judges": {"gpu_judge.py"}}, roles) == []
    assert name_faults("fabric", "fabric.py", {"role logic": {"fabric.py"}}, roles) == []
