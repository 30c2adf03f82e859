"""Xid events: what the NVIDIA driver wrote to the kernel log since boot.

The driver reports GPU faults as ``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., name=..., <text>``.
The log is read from the first source that answers: a captured file
(``--kernel-log``), ``/dev/kmsg`` (read without blocking), ``journalctl -k -b``,
then ``dmesg``, each under the deadline. Reading it needs no root: where nothing
can be read (``kernel.dmesg_restrict``, a container without ``/dev/kmsg``) the
probe says so (``readable`` false, with the reasons) and the rules skip.

Only Xid lines are kept, at most MAX_EVENTS of them (the newest), so a long
uptime's log costs memory for its Xid lines alone; a captured file is read line
by line, at most MAX_FILE_BYTES.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import stat
import time
from collections import deque
from typing import Any, Deque, Dict, Iterable, List, Optional

MAX_EVENTS = 1000
MAX_FILE_BYTES = 256 << 20   # a captured log larger than this is read up to here
MAX_COMMAND_OUTPUT = 64 << 20
COMMAND_TIMEOUT = 5.0        # seconds journalctl or dmesg may take, within the deadline
KMSG = "/dev/kmsg"

# Drivers since R470 write "Xid (PCI:0000:3b:00): 79, ..."; older ones "Xid (0000:3b:00): 79, ...".
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?\): "
                  r"(?P<xid>\d{1,5})\b,?\s?(?P<rest>.{0,300})")
_PID = re.compile(r"\bpid=(?P<pid>[^,\s]{1,20})")
_NAME = re.compile(r"\bname=(?P<name>[^,]{1,80})")


def parse_line(line: str) -> Optional[Dict[str, Any]]:
    """One Xid event from one log line, or None."""
    if "NVRM: Xid" not in line:
        return None
    match = _XID.search(line)
    if not match:
        return None
    rest = match.group("rest").strip()
    pid, name = _PID.search(rest), _NAME.search(rest)
    text = rest
    for found in (pid, name):
        if found:
            text = text.replace(found.group(0), "")
    return {"xid": int(match.group("xid")), "pci": normal_pci(match.group("pci")),
            "pid": pid.group("pid") if pid else None, "process": name.group("name").strip() if name else None,
            "text": text.strip(" ,.") or None}


def normal_pci(address: str) -> str:
    """``0000:3b:00`` and NVML's ``00000000:3B:00.0`` alike: domain:bus:device in lower case, domain of 4."""
    parts = address.lower().split(":")
    if len(parts) < 3:
        return address.lower()
    domain, bus, device = parts[0], parts[1], parts[2].split(".")[0]
    return "%04x:%s:%s" % (int(domain, 16), bus, device)


def probe(path: Optional[str] = None, timeout: float = 5.0) -> Dict[str, Any]:
    deadline = time.monotonic() + timeout
    if path:
        return read_captured(open_captured(path), path, deadline)
    reasons = []
    for source, read in ((KMSG, _kmsg), ("journalctl -k -b", _journalctl), ("dmesg", _dmesg)):
        left = deadline - time.monotonic()
        if left <= 0:
            reasons.append("%s: no time left (--timeout)" % source)
            break
        try:
            lines = read(deadline)
        except _Unreadable as exc:
            reasons.append("%s: %s" % (source, exc))
            continue
        return _events(lines, source)
    return {"readable": False, "source": None, "reason": "; ".join(reasons), "events": [], "truncated": False}


def not_recorded() -> Dict[str, Any]:
    return {"readable": False, "source": None, "events": [], "truncated": False,
            "reason": "a replayed machine's kernel log is not recorded; give it with --kernel-log FILE"}


class _Unreadable(Exception):
    pass


def _events(lines: Iterable[str], source: str) -> Dict[str, Any]:
    kept: Deque[Dict[str, Any]] = deque(maxlen=MAX_EVENTS)
    seen = 0
    for line in lines:
        event = parse_line(line)
        if event is not None:
            kept.append(event)
            seen += 1
    return {"readable": True, "source": source, "reason": None, "events": list(kept), "truncated": seen > MAX_EVENTS}


MAX_LINE = 64 << 10  # a kernel log line is short; longer "lines" (a binary file, /dev/zero) are cut in pieces
_CHUNK = 1 << 16
_HINT = "a kernel log captured with dmesg, journalctl -k or from /var/log/kern.log"


def open_captured(path: str) -> int:
    """Open --kernel-log without blocking (a FIFO with no writer would block ``open`` itself): a missing file or a
    folder is the user's error (exit 2), said at once; the reading is the probe's, under the deadline."""
    from preflight.errors import PreflightError

    if os.path.isdir(path):
        raise PreflightError("--kernel-log %s: is a folder" % path, _HINT)
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise PreflightError("--kernel-log %s: %s" % (path, exc.strerror or exc), _HINT)


def read_captured(descriptor: int, path: str, deadline: float) -> Dict[str, Any]:
    """A captured log, read line by line up to MAX_FILE_BYTES and until the deadline: a file, a pipe such as
    <(journalctl -k), a FIFO (waited for until a writer has written and closed it). Past the deadline the probe
    times out like any other (the Xid rules then say the log was not read)."""
    from preflight.errors import ProbeTimeout

    started = time.monotonic()
    fifo = stat.S_ISFIFO(os.fstat(descriptor).st_mode)
    seen_data = False

    def lines() -> Iterable[str]:
        nonlocal seen_data
        read, partial = 0, b""
        while read < MAX_FILE_BYTES:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProbeTimeout("--kernel-log %s: still reading at the deadline (--timeout)" % path,
                                   time.monotonic() - started)
            ready, _, _ = select.select([descriptor], [], [], min(left, 0.25))
            if not ready:
                continue
            try:
                chunk = os.read(descriptor, min(_CHUNK, MAX_FILE_BYTES - read))
            except BlockingIOError:
                continue
            if not chunk:
                if fifo and not seen_data:  # no writer yet: wait for one, within the deadline
                    time.sleep(0.01)
                    continue
                break
            seen_data = True
            read += len(chunk)
            pieces = (partial + chunk).split(b"\n")
            partial = pieces.pop()
            for piece in pieces:
                yield piece[:MAX_LINE].decode("utf-8", "replace")
            while len(partial) > MAX_LINE:  # no newline for a long stretch: a binary file
                yield partial[:MAX_LINE].decode("utf-8", "replace")
                partial = partial[MAX_LINE:]
        if partial:
            yield partial.decode("utf-8", "replace")

    try:
        return _events(lines(), "file:%s" % path)
    finally:
        os.close(descriptor)


def _kmsg(deadline: float) -> List[str]:
    """Every record in the kernel's ring buffer, read without blocking (each read returns one record)."""
    try:
        fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise _Unreadable(exc.strerror or str(exc))
    lines: List[str] = []  # only the Xid lines: a large ring buffer is not kept in memory
    records = 0
    try:
        while True:
            try:
                record = os.read(fd, 16384)
            except BlockingIOError:
                break  # the end of the buffer
            except BrokenPipeError:
                continue  # records were overwritten while reading: go on with the next
            except OSError as exc:
                raise _Unreadable(exc.strerror or str(exc))
            if not record:
                break
            records += 1
            if b"NVRM: Xid" in record:
                lines.append(record.decode("utf-8", "replace").split(";", 1)[-1].rstrip("\n"))
            if records % 4096 == 0 and time.monotonic() > deadline:
                raise _Unreadable("no time left while reading (--timeout)")
    finally:
        os.close(fd)
    if not records:
        raise _Unreadable("empty")
    return lines


def _command(argv: List[str], deadline: float) -> List[str]:
    from preflight.probes import process

    if shutil.which(argv[0]) is None:
        raise _Unreadable("not installed")
    try:
        done = process.run(argv, min(COMMAND_TIMEOUT, deadline - time.monotonic()), limit=MAX_COMMAND_OUTPUT)
    except (process.CommandTimeout, process.CommandFailed) as exc:
        raise _Unreadable(str(exc))
    problem = (done.stderr or "").strip().splitlines()
    if done.returncode != 0:
        raise _Unreadable(problem[-1] if problem else "exit status %d" % done.returncode)
    lines = done.stdout.splitlines()
    if not lines:  # every booted kernel has logged something: an empty answer is a view without the kernel's lines
        raise _Unreadable(problem[-1] if problem else "no kernel messages visible to this user")
    return lines


def _journalctl(deadline: float) -> List[str]:
    lines = _command(["journalctl", "-k", "-b", "-o", "cat", "--no-pager", "-q"], deadline)
    return lines


def _dmesg(deadline: float) -> List[str]:
    return _command(["dmesg"], deadline)
