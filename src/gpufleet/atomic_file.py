"""A file replaced whole, never written through: what every report file and textfile is written with."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def replace(path: Path, text: str) -> None:
    """``path`` replaced by a file holding ``text``: written to a new file of a name no one else has
    (mkstemp: O_CREAT|O_EXCL, so a link planted in the directory is never followed or written
    through), then renamed over ``path`` (which replaces a link there, never its target); readable
    by all (0644: a web server, node_exporter's own user). Nothing is left behind when it fails.
    The temporary file is hidden (``.<name>.<random>.tmp``), so a textfile collector reading
    ``*.prom`` never reads it."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
