#!/usr/bin/env bash
# `make sanity`: ansible-core's own sanity suite (ansible-test sanity) on what the collection ships.
#
# ansible-test only runs from a path .../ansible_collections/<namespace>/<name>/ (the symlink in
# .gpufleet/collections resolves to the repository, which is not such a path), and it tests every
# file under it. So this copies into a fresh temporary ansible_collections tree the files git knows
# (tracked, and new ones not ignored: what ansible-test itself would list in a git checkout) that
# `ansible-galaxy collection build` ships, i.e. without galaxy.yml's build_ignore paths: src/ and sim/ (the
# gpufleet command and the simulator), tests/, bench/, molecule/, scripts/. Those are not
# collection content; ruff, mypy (strict) and pytest check them in `make lint`/`make unit`, and
# ansible-test's pylint rules are for code that runs inside Ansible. tests/sanity/ (the ignore
# file) is copied as ansible-test needs it.
#
# ansible-test puts pip into each sanity test's virtual environment with a get-pip.py it downloads
# from ci-files.testing.ansible.com, which our machines cannot reach (only PyPI): its cache gets
# scripts/ansible-test-get-pip.py instead, which uses this Python's ensurepip. The virtual
# environments (~/.ansible/test/venv) are built from PyPI once, then reused.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
BIN=$(cd "$(dirname "$PY")" && pwd)

pip_version=$("$PY" -c 'import types
from ansible_test._internal.python_requirements import get_venv_packages
print(get_venv_packages(types.SimpleNamespace(version=None))["pip"])')
get_pip=~/.ansible/test/cache/get_pip_${pip_version//./_}.py
if [ ! -e "$get_pip" ] || grep -q 'gpufleet: ansible-test pip bootstrap' "$get_pip"; then
  mkdir -p "$(dirname "$get_pip")"
  cp scripts/ansible-test-get-pip.py "$get_pip"
fi

# Outside the repository: ansible-test would take an enclosing .git for the list of files.
tmp=$(mktemp -d -t gpufleet-sanity.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/ansible_collections/gpufleet/node
mkdir -p "$dest"
git ls-files -z --cached --others --exclude-standard | "$PY" -c '
import fnmatch, os, sys, yaml
ignore = yaml.safe_load(open("galaxy.yml"))["build_ignore"]
def shipped(path):
    if path.startswith("tests/sanity/"):
        return True
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return not any(fnmatch.fnmatch(p, pat) for p in prefixes for pat in ignore)
paths = sys.stdin.read().split("\0")
sys.stdout.write("".join(p + "\0" for p in paths if p and os.path.isfile(p) and shipped(p)))
' | tar --null -T - -cf - | tar -xf - -C "$dest"

# Skipped, as `make lint` runs the same check in the same `make test` (each costs a virtual
# environment built from PyPI on a fresh machine, then 5-20 s a run):
#   ansible-doc: make lint renders every module with ansible-doc;
#   pep8: make lint's ruff checks plugins/ with pycodestyle's E and W rules (at 110 columns, not 160).
skip=(--skip-test ansible-doc --skip-test pep8)
py_version=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
cd "$dest"
"$BIN/ansible-test" sanity --python "$py_version" --local "${skip[@]}" "$@"
