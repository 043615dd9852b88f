#!/usr/bin/env bash
# Prints the path of a Python >= 3.12 (ansible-core 2.21 needs it); PYTHON=... overrides.
set -u
ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; }
if [ -n "${PYTHON:-}" ]; then
  if ok "$PYTHON"; then echo "$PYTHON"; exit 0; fi
  echo "error: PYTHON=$PYTHON is not a working Python >= 3.12" >&2; exit 2
fi
for c in python3.13 python3.12 python3; do
  p=$(command -v "$c" 2>/dev/null) && ok "$p" && { echo "$p"; exit 0; }
done
# pyenv shims fail unless PYENV_VERSION is set: ask pyenv for the real prefix.
if command -v pyenv >/dev/null 2>&1; then
  for v in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.(1[2-9])' | sort -rV); do
    p="$(pyenv prefix "$v" 2>/dev/null)/bin/python3"
    ok "$p" && { echo "$p"; exit 0; }
  done
fi
echo "error: gpufleet needs Python >= 3.12 for ansible-core 2.21; none found." \
     "Install one (e.g. pyenv install 3.12) or run: make PYTHON=/path/to/python3.12" >&2
exit 2
