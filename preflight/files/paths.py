"""Where a write may go: one link policy for every file preflight writes.

preflight often runs as root (a Slurm health program, a DaemonSet, a container entrypoint) and writes into
folders other users can write: a shared report folder, NFD's ``features.d``, ``/tmp``. A symbolic link planted
there would make root replace or create a file of the planter's choosing. So every path preflight writes to
(``--output``, ``serve --nfd-output``, ``--report-dir``, the termination log, the cache) is resolved here,
component by component, and a link is followed only when it is safe to:

- a link is followed when root or the user preflight runs as owns it, or when its folder is owned by root or this
  user and no one else can write it: an administrator's own links. Any other link (in ``/tmp``, in a shared drop
  folder, in a group-writable folder, in a folder another user owns) is refused: whoever can write a folder can
  plant a link there (the kernel's ``protected_symlinks`` rule, made stricter);
- at most ``MAX_LINKS`` links are followed (a loop is an error, not a hang).

Resolving in user space would otherwise sidestep the kernel's own rule, so the result is a real folder and a
final name in it; the caller opens the folder once and works relative to it (``open_folder``), creating
temporaries with ``O_CREAT|O_EXCL|O_NOFOLLOW`` and random names, so that nothing is followed after the check.
"""

from __future__ import annotations

import os
import stat
from typing import NamedTuple

from preflight.errors import OutputError

MAX_LINKS = 40  # as the kernel's own limit on links in one path (ELOOP)


class UnsafeLink(OutputError):
    """A path goes through a link that someone else could have planted (exit 2, nothing written)."""


class Resolved(NamedTuple):
    folder: str  # a real folder: every link on the way was followed (safely)
    name: str  # the final name in it (may not exist yet; never a link that was refused)


def trusted_owners() -> tuple:
    return (0, os.geteuid()) if hasattr(os, "geteuid") else (0,)


def shared_folder(info: os.stat_result) -> bool:
    """A folder where users other than its owner can create entries (and so plant links)."""
    return bool(info.st_mode & (stat.S_IWOTH | stat.S_IWGRP | stat.S_ISVTX))


def others_can_write(info: os.stat_result) -> bool:
    """A folder in which someone other than root and this user can create entries: shared, or owned by another."""
    return shared_folder(info) or info.st_uid not in trusted_owners()


def _split(path: str):
    return [part for part in path.split("/") if part not in ("", ".")]


def resolve(path: str, what: str) -> Resolved:
    """``path`` with every link followed under the policy; ``what`` names the path in messages (``--output x``).

    Raises UnsafeLink for a refused link, OutputError for a loop or a missing folder on the way.
    """
    full = path if path.startswith("/") else os.getcwd().rstrip("/") + "/" + path
    pending = _split(full)
    if not pending:
        raise OutputError("%s is the root folder; give a file name" % what)
    current = "/"
    followed = 0
    while pending:
        part = pending.pop(0)
        if part == "..":
            current = os.path.dirname(current) or "/"
            continue
        candidate = os.path.join(current, part)
        try:
            info = os.lstat(candidate)
        except FileNotFoundError:
            if pending:
                raise OutputError("%s: the folder %s does not exist; nothing was written" % (what, candidate))
            return Resolved(current, part)
        except OSError as exc:
            raise OutputError("%s: cannot look at %s: %s; nothing was written" % (what, candidate,
                                                                                 exc.strerror or exc))
        if stat.S_ISLNK(info.st_mode):
            followed += 1
            if followed > MAX_LINKS:
                raise OutputError("%s: more than %d symbolic links (a loop?); nothing was written" % (what, MAX_LINKS))
            check_link(candidate, info, current, what)
            target = os.readlink(candidate)
            if target.startswith("/"):
                current = "/"
            pending = _split(target) + pending
            if not pending:  # a link to "/"
                raise OutputError("%s leads to the root folder; give a file name" % what)
            continue
        if pending:
            if not stat.S_ISDIR(info.st_mode):
                raise OutputError("%s: %s is not a folder; nothing was written" % (what, candidate))
            current = candidate
            continue
        return Resolved(current, part)
    # The path ended in ".." (or a link's target did): that is a folder, not a file.
    raise OutputError("%s is a folder; give a file name" % what)


def resolve_folder(path: str, what: str) -> str:
    """The real folder ``path`` names, every link on the way followed under the policy."""
    if _split(path) == []:
        return "/"
    resolved = resolve(path, what)
    folder = os.path.join(resolved.folder, resolved.name)
    if not os.path.isdir(folder):
        raise OutputError("%s: %s is not a folder; nothing was written" % (what, folder))
    return folder


def check_link(link: str, info: os.stat_result, folder: str, what: str) -> None:
    """Refuse ``link`` unless root or this user owns it, or its folder is one only root or this user can write."""
    try:
        folder_info = os.stat(folder)
    except OSError as exc:
        raise OutputError("%s: cannot look at %s: %s" % (what, folder, exc.strerror or exc))
    if others_can_write(folder_info) and info.st_uid not in trusted_owners():
        raise UnsafeLink(
            "%s: %s is a symbolic link owned by user %d in %s, a folder %s: preflight does not follow it (someone "
            "could have planted it); nothing was written" % (
                what, link, info.st_uid, folder, "owned by user %d" % folder_info.st_uid
                if folder_info.st_uid not in trusted_owners() else "other users can write"),
            "write to a path without that link, or have root or this user own the link")


def open_folder(folder: str, what: str) -> int:
    """A descriptor of the resolved folder, for work relative to it (no path is looked up again)."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        return os.open(folder, flags)
    except OSError as exc:
        raise OutputError("%s: cannot open the folder %s: %s; nothing was written" % (what, folder,
                                                                                     exc.strerror or exc))


def random_suffix() -> str:
    return os.urandom(6).hex()


def create_exclusive(name: str, folder_fd: int, mode: int = 0o600) -> int:
    """A new file ``name`` in the folder, never a link followed or an existing file reused."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.open(name, flags, mode, dir_fd=folder_fd)
