"""Where a run's verdict is kept beyond its own output: one JSON report per node in a folder, a line in syslog.

``--report-dir DIR`` (check, exec, slurm) writes ``DIR/HOST.json``, replaced atomically at every run, the
folder ``preflight fleet`` reads. ``--syslog`` sends one line per run to the system log (``/dev/log``, which
journald and rsyslog read; ``PREFLIGHT_SYSLOG_SOCKET`` names another socket), as NHC does: the node's log keeps
what admission decided even when the report folder is on a file system that is down.
"""

from __future__ import annotations

import os
import socket
from typing import Callable, Optional

SYSLOG_SOCKET = "/dev/log"
SYSLOG_VARIABLE = "PREFLIGHT_SYSLOG_SOCKET"
_DAEMON = 3  # syslog facility: system daemons
SEVERITY = {"error": 3, "warning": 4, "notice": 5, "info": 6}


def file_name(host: str) -> str:
    """``HOST.json`` with any character a file name cannot safely hold replaced by ``_``."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in host).strip(".") or "unknown-host"
    return safe[:200] + ".json"


def write(folder: str, host: str, document_text: str) -> str:
    """Replace ``folder/HOST.json`` with the report, all or nothing; the folder must exist. Returns the path."""
    from preflight.errors import OutputError
    from preflight.files.output import write_atomically

    if not os.path.isdir(folder):
        raise OutputError("--report-dir %s: no such folder" % folder,
                          "create it (a shared folder that preflight fleet reads), or give another")
    path = os.path.join(folder, file_name(host))
    write_atomically(path, document_text, "--report-dir %s" % path, follow_final=False)
    return path


def syslog(message: str, severity: str = "info", warn: Optional[Callable[[str], None]] = None) -> bool:
    """Send one line to the system log; False (and one warning) when no syslog socket answers."""
    address = os.environ.get(SYSLOG_VARIABLE) or SYSLOG_SOCKET
    line = " ".join(message.split())[:2000]
    packet = "<%d>preflight[%d]: %s" % (_DAEMON * 8 + SEVERITY[severity], os.getpid(), line)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
            sender.settimeout(2.0)
            sender.connect(address)
            sender.send(packet.encode("utf-8", "replace"))
        return True
    except OSError as exc:
        if warn:
            warn("--syslog: cannot write to the system log at %s: %s" % (address, exc.strerror or exc))
        return False
