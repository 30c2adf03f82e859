"""Reading a fleet's files one at a time: reports (preflight.report/1) and facts snapshots (preflight.facts/1).

Paths are files or folders (walked, in name order); ``.json`` and ``.json.gz`` files are read, others in a
folder are passed over, a file named on the command line is always tried. ``-`` is standard input: a stream of
JSON documents, one per line or one after another. An ``http://`` or ``https://`` URL is a ``preflight serve``
(its ``/report`` unless the URL names a path), fetched URL_WORKERS at a time, each whole within URL_TIMEOUT. Each
document is read, judged and dropped before the next (``entries`` is a generator), so memory does not grow
with the files' sizes. A file or URL that cannot be read, is not JSON, or is neither kind is an ``Unreadable``
entry, never an exception.
"""

from __future__ import annotations

import gzip
import ipaddress
import json
import os
import socket
import stat
import sys
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Union

MAX_FILE_BYTES = 64 << 20  # a facts snapshot is tens of kilobytes; anything this large is not one


class Document(NamedTuple):
    path: str
    kind: str  # "report" or "facts"
    data: Dict[str, Any]


class Unreadable(NamedTuple):
    path: str
    reason: str


def _files(paths: Sequence[str]) -> Iterator[str]:
    for path in paths:
        if os.path.isdir(path):
            for folder, subfolders, names in os.walk(path):
                subfolders.sort()
                for name in sorted(names):
                    if name.endswith((".json", ".json.gz")):
                        yield os.path.join(folder, name)
        else:
            yield path


URL_WORKERS = 32
URL_TIMEOUT = 10.0  # seconds per URL, all of it: connecting, the headers and the report


def entries(paths: Sequence[str], stdin=None, files: Optional[Callable[[List[str]], Iterator[Any]]] = None) \
        -> Iterator[Any]:
    """Every document the paths give, in their order: URLs fetched (``URL_WORKERS`` at a time), ``-`` read as a
    stream, folders walked. ``files`` turns each path's list of files into entries (by default read here, one at
    a time; the fleet command judges them in worker processes)."""
    for path in paths:
        if path.startswith(("http://", "https://")):
            check_url(path)  # every URL before anything is read
    files = files or (lambda names: map(read, names))
    urls: List[str] = []
    for path in paths:
        if path.startswith(("http://", "https://")):
            urls.append(path)
            continue
        if urls:  # keep the order given: fetch the URLs named so far before the next file
            yield from fetch_all(urls)
            urls = []
        if path == "-":
            yield from stream_documents(stdin if stdin is not None else sys.stdin)
        else:
            yield from files(list(_files([path])))
    if urls:
        yield from fetch_all(urls)


def stream_documents(stream) -> Iterator[Union[Document, Unreadable]]:
    """JSON documents from a text stream, one per line (jsonl) or one after another (pretty-printed); the
    first that is not JSON ends the stream (nothing after it can be found again) as an Unreadable entry."""
    decoder = json.JSONDecoder()
    buffer, number, ended = "", 0, False
    while True:
        buffer = buffer.lstrip()
        if not buffer:
            chunk = "" if ended else stream.read(1 << 16)
            if not chunk:
                return
            buffer = chunk
            continue
        try:
            data, end = decoder.raw_decode(buffer)
            # An object or list is whole once parsed; a bare number at the end may go on in the next chunk.
            complete = ended or end < len(buffer) or isinstance(data, (dict, list))
            error = ""
        except ValueError as exc:
            complete, error = False, str(exc).split(":")[0]
        if not complete:
            if ended:
                yield Unreadable("-#%d" % (number + 1), "not JSON (%s)" % error)
                return
            if len(buffer) > MAX_FILE_BYTES:
                yield Unreadable("-#%d" % (number + 1), "a document larger than %d MiB on standard input"
                                 % (MAX_FILE_BYTES >> 20))
                return
            chunk = stream.read(max(1 << 16, len(buffer)))  # doubling: a long document is parsed few times
            ended = not chunk
            buffer += chunk
            continue
        number += 1
        buffer = buffer[end:]
        yield classify("-#%d" % number, data)


def fetch_all(urls: Sequence[str]) -> Iterator[Union[Document, Unreadable]]:
    """Each URL's report, in the order given, URL_WORKERS fetched at a time."""
    with ThreadPoolExecutor(max_workers=min(URL_WORKERS, len(urls))) as pool:
        window = []
        for url in urls:
            window.append(pool.submit(fetch, url))
            if len(window) >= URL_WORKERS * 2:
                yield window.pop(0).result()
        for future in window:
            yield future.result()


def check_url(url: str) -> None:
    """A URL fleet can fetch, or a PreflightError naming it (exit 2): before anything is fetched."""
    from preflight.errors import PreflightError

    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # ValueError: out of range or not a number
        host = parts.hostname
    except ValueError as exc:
        raise PreflightError("%s is not a URL fleet can fetch: %s" % (url, exc),
                             "give http://HOST:PORT of a preflight serve, e.g. http://gpu07:10480")
    if host and "[" in parts.netloc:  # Python 3.11 checks a bracketed host itself; 3.8 lets https://[zz]/ through
        try:
            ipaddress.IPv6Address(host.partition("%")[0])
        except ValueError:
            raise PreflightError("%s is not a URL fleet can fetch: %s is not an IPv6 address" % (url, host),
                                 "give http://HOST:PORT of a preflight serve, e.g. http://gpu07:10480") from None
    if not host or port == 0 or any(ord(c) < 33 or ord(c) == 127 for c in url):
        raise PreflightError("%s is not a URL fleet can fetch: %s" % (
            url, "it names no host" if not host else "port 0" if port == 0 else "it holds spaces or control "
            "characters"), "give http://HOST:PORT of a preflight serve, e.g. http://gpu07:10480")


def _connection(parts, timeout: float):
    """A connection to the URL's host, or through the proxy the environment names for it (http_proxy, no_proxy)."""
    import http.client

    https = parts.scheme == "https"
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(parts.hostname):
        address = urllib.parse.urlsplit(proxy if "://" in proxy else "http://" + proxy)
        connection = http.client.HTTPConnection(address.hostname, address.port or 80, timeout=timeout)
        if https:
            connection = http.client.HTTPSConnection(address.hostname, address.port or 80, timeout=timeout)
            connection.set_tunnel(parts.hostname, parts.port or 443)
            return connection, False
        return connection, True  # a plain HTTP proxy is asked for the whole URL
    if https:
        return http.client.HTTPSConnection(parts.hostname, parts.port or 443, timeout=timeout), False
    return http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout), False


def _cut(connection, sockets: list, cut) -> None:
    """The deadline passed: end whatever read or handshake is waiting on the connection (its socket, or the one
    the response reads from: an HTTP/1.0 response takes the socket over from the connection)."""
    cut.set()
    for sock in [connection.sock] + sockets:
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def fetch(url: str) -> Union[Document, Unreadable]:
    """One serve's report within URL_TIMEOUT, counted from the start: connecting, the status line and headers
    (a server that trickles them cannot hold the fleet view), and the body."""
    import http.client
    import threading

    from preflight import __version__

    parts = urllib.parse.urlsplit(url)
    path = parts.path if parts.path not in ("", "/") else "/report"
    path += "?" + parts.query if parts.query else ""
    connection, whole_url = _connection(parts, URL_TIMEOUT)
    sockets: list = []
    # The watchdog itself says that it cut: a read it cut looks like an answer that ended, and comparing clocks
    # instead misses it (the timer can wake a little before time.monotonic() reaches its deadline).
    cut = threading.Event()
    watchdog = threading.Timer(URL_TIMEOUT, _cut, (connection, sockets, cut))
    watchdog.daemon = True
    watchdog.start()
    late = "cannot fetch: the report did not arrive within %.0f s" % URL_TIMEOUT
    try:
        target = urllib.parse.urlunsplit(parts._replace(path=path, query="", fragment="")) if whole_url else path
        connection.request("GET", target, headers={"Accept": "application/json",
                                                   "User-Agent": "preflight/%s" % __version__})
        sockets.append(connection.sock)
        if cut.is_set():  # it fired while connecting, before there was a socket
            return Unreadable(url, late)
        response = connection.getresponse()
        if response.status == 503:  # serve answers 503 before its first check has finished
            return Unreadable(url, "HTTP 503: no check has finished there yet")
        if response.status != 200:
            hint = " (redirects are not followed: give the URL it names)" if 300 <= response.status < 400 else ""
            return Unreadable(url, "HTTP %d %s%s" % (response.status, response.reason, hint))
        chunks, size = [], 0
        while size <= MAX_FILE_BYTES:
            chunk = response.read1(min(1 << 16, MAX_FILE_BYTES + 1 - size))  # what has arrived, not 64 KiB
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if cut.is_set():
            return Unreadable(url, late)
        if response.length and size <= MAX_FILE_BYTES:  # Content-Length promised more than came
            return Unreadable(url, "cannot fetch: the answer ended after %d of %d bytes" % (size, size + response.length))
        raw = b"".join(chunks)
    except (http.client.HTTPException, OSError, ValueError) as exc:
        if cut.is_set():
            return Unreadable(url, late)
        if isinstance(exc, OSError):
            return Unreadable(url, "cannot fetch: %s" % (exc.strerror or exc))
        return Unreadable(url, "not an HTTP response a preflight serve gives: %s: %s"
                          % (type(exc).__name__, str(exc)[:200] or "no detail"))
    finally:
        watchdog.cancel()
        connection.close()
    return parsed(url, raw)


def read(path: str) -> Union[Document, Unreadable]:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a device or pipe could be endless or never answer
            return Unreadable(path, "not a regular file (a device, pipe or socket): give report or snapshot files")
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as handle:
                raw = handle.read(MAX_FILE_BYTES + 1)
        else:
            with open(path, "rb") as handle:
                raw = handle.read(MAX_FILE_BYTES + 1)
    except (OSError, EOFError) as exc:  # gzip raises OSError (BadGzipFile) or EOFError on a damaged file
        return Unreadable(path, getattr(exc, "strerror", None) or str(exc) or type(exc).__name__)
    return parsed(path, raw)


def parsed(path: str, raw: bytes) -> Union[Document, Unreadable]:
    """Bytes read from a file or URL (at most MAX_FILE_BYTES + 1) as a report or snapshot, or why not."""
    if len(raw) > MAX_FILE_BYTES:
        return Unreadable(path, "larger than %d MiB: not a preflight report or snapshot" % (MAX_FILE_BYTES >> 20))
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return Unreadable(path, "not JSON (%s)" % str(exc).split(":")[0])
    return classify(path, data)


def classify(path: str, data: Any) -> Union[Document, Unreadable]:
    """A parsed document as a report or a snapshot, or why it is neither."""
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema == "preflight.report/1":
        problem = report_problem(data)
        if problem:
            return Unreadable(path, "a preflight.report/1 of the wrong shape: %s" % problem)
        return Document(path, "report", data)
    if schema == "preflight.facts/1":
        return Document(path, "facts", data)
    return Unreadable(path, "neither a preflight report nor a facts snapshot (schema %r)" % (schema,))


_STATUSES = ("pass", "fail", "warn", "skip", "error")
_SEVERITIES = ("error", "warning", "info")


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def report_problem(data: Dict[str, Any]) -> str:
    """What is wrong with a report read from disk, in the parts the fleet uses ("" when nothing): a file another
    tool or an older preflight wrote, or one damaged by hand, is listed as unreadable, never a crash."""
    if not isinstance(data.get("ok"), bool):
        return "'ok' must be true or false"
    for key in ("host", "collected_at"):
        if data.get(key) is not None and not isinstance(data.get(key), str):
            return "'%s' must be a string" % key
    if data.get("inventory") is not None and not isinstance(data.get("inventory"), dict):
        return "'inventory' must be an object"
    results = data.get("results")
    if not isinstance(results, list):
        return "'results' must be a list"
    for index, result in enumerate(results):
        where = "results[%d]" % index
        if not isinstance(result, dict):
            return "%s must be an object" % where
        for key in ("id", "subject", "message"):
            if not isinstance(result.get(key), str) or (key == "id" and not result[key]):
                return "%s.%s must be a string" % (where, key)
        if result.get("title") is not None and not isinstance(result.get("title"), str):
            return "%s.title must be a string" % where
        if result.get("status") not in _STATUSES:
            return "%s.status must be one of %s, found %r" % (where, ", ".join(_STATUSES), result.get("status"))
        if result.get("severity") not in _SEVERITIES:
            return "%s.severity must be one of %s, found %r" % (where, ", ".join(_SEVERITIES), result.get("severity"))
        fix = result.get("fix")
        if fix is not None and not (isinstance(fix, dict) and isinstance(fix.get("title"), str)
                                    and _strings(fix.get("steps", [])) and _strings(fix.get("commands", []))):
            return "%s.fix must be null or an object with a title, steps and commands (strings)" % where
    return ""
