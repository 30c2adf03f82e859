"""Read an input file (JSON, TOML or text) the one careful way: regular files only, size-capped, no NaN.

Used for facts snapshots, NVML fixtures and rule files. A FIFO or device where
a file is expected would block or never end (``--facts /dev/zero``), so only
regular files are opened (and opened without blocking, in case one is swapped
in); ``-`` reads standard input where the caller allows it. Every problem is
the caller's error class, naming the file and saying what to do.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from typing import Any, Callable

from preflight.errors import PreflightError

MAX_BYTES = 64 << 20


def read_bytes(path: str, what: str, error: Callable[..., PreflightError], hint: str = "", allow_stdin: bool = False,
               limit: int = MAX_BYTES) -> bytes:
    """The bytes of ``path`` (``what`` names it in messages: "facts file x.json")."""
    if path == "-" and allow_stdin:
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:
            raise error("%s: standard input is closed" % what, "pipe the data in, or give a file")
        try:
            data = _read_up_to(stream, limit + 1, 1 << 16)
        except (OSError, ValueError) as exc:
            raise error("%s: cannot read standard input: %s" % (what, exc), hint)
        return _capped(data, what, error, limit)
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error("%s: no such file" % what, hint)
    except IsADirectoryError:
        raise error("%s is a folder, not a file" % what, hint)
    except OSError as exc:
        raise error("%s: cannot open it: %s" % (what, exc.strerror or exc), hint)
    try:
        info = os.fstat(descriptor)
        if stat.S_ISDIR(info.st_mode):
            raise error("%s is a folder, not a file" % what, hint)
        if not stat.S_ISREG(info.st_mode):
            raise error("%s is not a regular file (a device, pipe or socket); give a file" % what, hint)
        if info.st_size > limit:
            raise error("%s is %d MiB; more than the %d MiB such a file can be" % (what, info.st_size >> 20, limit >> 20),
                        hint)
        with os.fdopen(descriptor, "rb") as handle:
            descriptor = -1
            # Asking read() for the whole limit at once would allocate it: read what the file holds.
            return _capped(_read_up_to(handle, limit + 1, info.st_size + 1), what, error, limit)
    except OSError as exc:
        raise error("%s: cannot read it: %s" % (what, exc.strerror or exc), hint)
    finally:
        if descriptor >= 0:
            os.close(descriptor)


def _read_up_to(stream, most: int, first: int) -> bytes:
    """At most ``most`` bytes, in pieces (``first`` bytes first), so that a small file costs little."""
    chunks = []
    size = 0
    want = min(most, max(first, 1))
    while size < most:
        chunk = stream.read(min(want, most - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        want = 1 << 20
    return b"".join(chunks)


def _capped(data: bytes, what: str, error: Callable[..., PreflightError], limit: int) -> bytes:
    if len(data) > limit:
        raise error("%s: more than %d MiB; too large for such a file" % (what, limit >> 20))
    return data


def _text(data: bytes, what: str, error: Callable[..., PreflightError], hint: str = "") -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error("%s: not UTF-8 text (%s)" % (what, exc), hint)


def _reject_constant(name: str) -> Any:
    raise ValueError("%s is not a number JSON allows" % name)


def parse_json(text: str, what: str, error: Callable[..., PreflightError], hint: str = "") -> Any:
    """JSON as the standard says it: NaN and Infinity are refused; nesting too deep is an error, not a crash."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise error("%s: nested too deeply to be a real file" % what, hint)
    except ValueError as exc:
        raise error("%s: not valid JSON (%s)" % (what, exc), hint)


def parse_toml(text: str, what: str = "a TOML file") -> Any:
    """TOML text -> data; ValueError says what is wrong. The parser is imported here: a check reads the shipped
    files from their release-time parse (preflight.knowledge.shipped) and needs it only for a site's own files."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError("not valid TOML: %s" % exc)
    except RecursionError:
        raise ValueError("nested too deeply to be %s" % what)


def load_json(path: str, what: str, error: Callable[..., PreflightError], hint: str = "", allow_stdin: bool = False,
              limit: int = MAX_BYTES) -> Any:
    data = read_bytes(path, what, error, hint, allow_stdin, limit)
    return parse_json(_text(data, what, error, hint), what, error, hint)
