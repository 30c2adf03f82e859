"""Whether root may run a checkout's code (``preflight smoke --repo``): only if no one but root and the user who
ran sudo can change any of it, as git's safe.directory decides whom root trusts.

The worker puts the checkout first on Python's search path, so what it may run is every module file in the
checkout (source, bytecode in ``__pycache__``, an extension), anything planted in any of its folders, and the
model definition (YOLO's ``parse_model`` evaluates the strings in it). So every folder of the checkout and every
file Python could import or the fit reads must be owned by a trusted user and writable by no one else (a group
write bit counts only for a group of other users); a link
is judged by what it leads to. Whoever can rename a folder above the checkout (or above a link's target) can
swap the whole tree, so those folders are judged too, where a shared folder is allowed if it is sticky (as
``/tmp``: others cannot rename what root owns there).
"""

from __future__ import annotations

import importlib.machinery
import os
import stat
from typing import Dict, Iterable, Optional, Tuple

IMPORTABLE = tuple(importlib.machinery.all_suffixes())  # .py, .pyc, .cpython-311-x86_64-linux-gnu.so, .so, ...
SKIPPED = (".git",)  # git's own data: nothing in it is imported


def trusted_users() -> Tuple[int, ...]:
    """Root, the user preflight runs as, and the user who ran sudo (SUDO_UID)."""
    users = {0, os.geteuid()} if hasattr(os, "geteuid") else {0}
    invoking = os.environ.get("SUDO_UID", "")
    if invoking.isdigit():
        users.add(int(invoking))
    return tuple(sorted(users))


def trusted_groups(users: Tuple[int, ...]) -> Tuple[int, ...]:
    """Groups whose write access is the trusted users' own: a trusted user's primary group when it is root's or
    that user's private group (named after the user), and lists no other member. A checkout made with umask 002
    is group-writable by its owner's private group, which gives no one else a way in."""
    import grp
    import pwd

    names, groups = set(), set()
    for user in users:
        try:
            names.add(pwd.getpwuid(user).pw_name)
        except KeyError:
            pass
    for user in users:
        try:
            gid = pwd.getpwuid(user).pw_gid
            group = grp.getgrgid(gid)
        except KeyError:
            continue
        if (gid == 0 or group.gr_name in names) and set(group.gr_mem) <= names:
            groups.add(gid)
    return tuple(sorted(groups))


def first_untrusted(repo: str, files: Iterable[str] = ()) -> Optional[str]:
    """The first path of the checkout (and of ``files``, which the code reads) someone else could change, and
    why; None when there is none. Folders first, then the files in them, in walking order."""
    users = trusted_users()
    judge = _Judge(users, trusted_groups(users))
    root = os.path.abspath(repo)
    if not os.path.isdir(root):
        return None  # nothing of it can run: the worker says what the checkout lacks
    problem = judge.above(root)
    if problem:
        return problem
    seen = set()
    for folder, folders, names in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:  # a link back up the tree: walked once
            folders[:] = []
            continue
        seen.add(real)
        problem = judge.inside(folder, root)
        if problem:
            return problem
        folders[:] = sorted(name for name in folders if name not in SKIPPED)
        for name in sorted(names):
            if name.endswith(IMPORTABLE):
                problem = judge.file(os.path.join(folder, name), root)
                if problem:
                    return problem
    for path in files:
        full = os.path.join(root, path)
        if os.path.exists(full):
            problem = judge.above(os.path.dirname(os.path.realpath(full))) or judge.file(full, root)
            if problem:
                return problem
    return None


class _Judge:
    def __init__(self, users: Tuple[int, ...], groups: Tuple[int, ...]) -> None:
        self.users = users
        self.groups = groups
        self.judged: Dict[str, Optional[str]] = {}  # folders above, by real path

    def _owner_and_mode(self, info: os.stat_result, sticky_allowed: bool) -> Optional[str]:
        if info.st_uid not in self.users:
            return "user %d owns it" % info.st_uid
        writable = info.st_mode & (stat.S_IWOTH if info.st_gid in self.groups else stat.S_IWGRP | stat.S_IWOTH)
        if writable and not (sticky_allowed and info.st_mode & stat.S_ISVTX):
            return "%s can write it (mode %o)" % ("others" if writable & stat.S_IWOTH else "group %d" % info.st_gid,
                                                  info.st_mode & 0o7777)
        return None

    def above(self, folder: str) -> Optional[str]:
        """The real path of ``folder`` and each folder above it up to /."""
        path = os.path.realpath(folder)
        while True:
            if path not in self.judged:
                try:
                    problem = self._owner_and_mode(os.stat(path), sticky_allowed=True)
                except OSError as exc:
                    problem = "cannot look at it: %s" % (exc.strerror or exc)
                self.judged[path] = "%s (a folder above the checkout's code): %s" % (path, problem) if problem \
                    else None
            if self.judged[path]:
                return self.judged[path]
            parent = os.path.dirname(path)
            if parent == path:
                return None
            path = parent

    def inside(self, folder: str, root: str) -> Optional[str]:
        """A folder of the checkout: no one else may add a module to it."""
        shown = _shown(folder, root)
        try:
            if os.path.islink(folder):
                problem = self.above(os.path.dirname(os.path.realpath(folder)))
                if problem:
                    return "%s is a link: %s" % (shown, problem)
            problem = self._owner_and_mode(os.stat(folder), sticky_allowed=False)
        except OSError as exc:
            problem = "cannot look at it: %s" % (exc.strerror or exc)
        return "%s: %s" % (shown, problem) if problem else None

    def file(self, path: str, root: str) -> Optional[str]:
        shown = _shown(path, root)
        try:
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                target = os.path.realpath(path)
                problem = self.above(os.path.dirname(target)) or self._owner_and_mode(os.stat(target), False)
                return "%s is a link to %s: %s" % (shown, target, problem) if problem else None
            problem = self._owner_and_mode(info, sticky_allowed=False)
        except OSError as exc:
            problem = "cannot look at it: %s" % (exc.strerror or exc)
        return "%s: %s" % (shown, problem) if problem else None


def _shown(path: str, root: str) -> str:
    """A path of the checkout as the user knows it: relative to the checkout, else as it is."""
    relative = os.path.relpath(path, root)
    return path if relative.startswith("..") else os.path.join(os.path.basename(root), relative)
