"""Write a report file so that a reader never sees half of it.

The text goes to a hidden temporary file in the target's folder (NFD and the
node_exporter textfile collector ignore dot-files), is flushed to disk, and
then renamed over the target: a rename within one filesystem is atomic. If
anything fails, the temporary file is removed and the old file stays as it was.
"""

from __future__ import annotations

import os
import tempfile

from preflight.errors import PreflightError


def write_atomically(path: str, text: str) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise PreflightError("--output %s: the folder %s does not exist; nothing was written" % (path, folder))
    try:
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".%s." % os.path.basename(path), suffix=".tmp")
    except OSError as exc:
        raise PreflightError("--output %s: cannot create a file in %s: %s; the old file is unchanged"
                             % (path, folder, exc.strerror or exc))
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        if os.path.exists(path):
            os.chmod(temporary, os.stat(path).st_mode & 0o7777)
        else:
            os.chmod(temporary, 0o644)  # readers (NFD, node_exporter) often run as other users
        os.replace(temporary, path)
    except OSError as exc:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise PreflightError("--output %s: writing failed: %s; the old file is unchanged" % (path, exc.strerror or exc))
