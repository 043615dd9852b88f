#!/usr/bin/env bash
# scripts/timed.sh NAME COMMAND...: runs COMMAND, then prints "NAME: passed in N s" (or "FAILED (exit
# RC) in N s") and exits with its status. `make lint` and `make test` run their independent checks at
# once with make's output grouped per check; this line says which check a block of output was, how
# long it took and whether it passed.
set -uo pipefail
name=$1
shift
start=$(date +%s%N)
"$@"
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
if [ "$rc" -eq 0 ]; then
  printf '== %s: passed in %d.%d s\n' "$name" $((ms / 1000)) $((ms % 1000 / 100))
else
  printf '== %s: FAILED (exit %d) in %d.%d s\n' "$name" "$rc" $((ms / 1000)) $((ms % 1000 / 100))
fi
exit "$rc"
