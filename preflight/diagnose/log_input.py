"""What a log's bytes are, from its first SNIFF_BYTES: UTF-8 text (a byte-order mark dropped), UTF-16 or UTF-32
text (PowerShell's ``>`` writes UTF-16 little-endian with a mark; decoded to UTF-8 as it is read, and read as
UTF-8 from where the log turns into UTF-8, as when another program appended to it), gzip (whatever the name;
expanded to at most ``GZIP_EXPANDED`` bytes, so that a small file that expands without end is read for a bounded
time, and said), or not a log at all: a checkpoint, an archive or random bytes passed by mistake are said to be so
at once, never scanned for minutes.
"""

from __future__ import annotations

import codecs
import gzip
import re
from typing import BinaryIO, List, Optional

from preflight.errors import PreflightError

SNIFF_BYTES = 64 << 10
GZIP_EXPANDED = 64 << 30  # bytes a gzip log is expanded to, at most (about a minute of zlib's time)
# Bytes no text log holds: C0 controls but tab, newline, vertical tab, form feed, carriage return, backspace and
# ESC (colour codes), and DEL. Random bytes hold about 11% of them, text none.
CONTROL = bytes(b for b in range(32) if b not in b"\t\n\v\f\r\b\x1b") + b"\x7f"
BINARY_SHARE = 0.05
_MAGIC = ((b"PK\x03\x04", "a zip archive (a PyTorch checkpoint saved by torch.save is one)"),
          (b"\x80\x02", "a Python pickle (an old PyTorch checkpoint?)"), (b"\x80\x04", "a Python pickle"),
          (b"\x80\x05", "a Python pickle"), (b"\x7fELF", "an executable (ELF)"), (b"\x89PNG", "a PNG image"),
          (b"\xff\xd8\xff", "a JPEG image"), (b"\x93NUMPY", "a NumPy array file"), (b"BZh", "a bzip2 archive"),
          (b"\xfd7zXZ\x00", "an xz archive"), (b"\x28\xb5\x2f\xfd", "a zstd archive"), (b"ustar", "a tar archive"))
# UTF-32's marks first: UTF-32 little-endian's begins with UTF-16 little-endian's.
_WIDE = ((codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32 little-endian"), (codecs.BOM_UTF32_BE, "utf-32-be",
                                                                     "UTF-32 big-endian"),
         (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16 little-endian"), (codecs.BOM_UTF16_BE, "utf-16-be",
                                                                     "UTF-16 big-endian"))
# Where a wide-text log turns into UTF-8: a run of printable ASCII bytes with no NUL among them, which UTF-16 or
# UTF-32 text of ASCII never has and CJK text in UTF-16 has with a vanishing chance (both bytes of 32 characters
# in a row would have to be printable ASCII).
_NARROW_RUN = re.compile(rb"[\t\n\r\x20-\x7e]{64}")


def binary_share(data: bytes) -> float:
    """The share of ``data`` that is bytes no text holds."""
    if not data:
        return 0.0
    return (len(data) - len(data.translate(None, CONTROL))) / len(data)


class _Prefixed:
    """A stream that gives back ``prefix`` (bytes already read from ``stream``) before the rest of ``stream``."""

    def __init__(self, prefix: bytes, stream: BinaryIO) -> None:
        self.prefix = prefix
        self.stream = stream

    def read(self, size: int = -1) -> bytes:
        if self.prefix:
            head = self.prefix if size < 0 else self.prefix[:size]
            self.prefix = self.prefix[len(head):]
            if size < 0:
                return head + self.stream.read()
            return head
        return self.stream.read(size)

    def close(self) -> None:
        self.stream.close()


class _Transcoded:
    """UTF-16 or UTF-32 read as UTF-8 bytes, chunk by chunk (invalid sequences replaced, as UTF-8 logs' are), and
    passed through as it is from where the log turns into UTF-8 (``notes`` says from which byte)."""

    def __init__(self, stream, encoding: str, notes: List[str], offset: int = 0) -> None:
        self.stream = stream
        self.decoder = codecs.getincrementaldecoder(encoding)("replace")
        self.notes = notes
        self.narrow = False  # the log has turned into UTF-8
        self.offset = offset  # bytes of the file before what is read next (a byte-order mark)

    def read(self, size: int = -1) -> bytes:
        while True:
            raw = self.stream.read(size)
            if self.narrow:
                return raw
            turn = _narrow_from(raw)
            if turn is not None:
                self.narrow = True
                self.notes.append("read as UTF-8 from byte %d on, where it turns into UTF-8" % (self.offset + turn))
                text = self.decoder.decode(raw[:turn], final=True)
                return text.lstrip("\ufeff").encode("utf-8") + raw[turn:]
            self.offset += len(raw)
            text = self.decoder.decode(raw, final=not raw)
            if text or not raw:
                return text.lstrip("\ufeff").encode("utf-8")

    def close(self) -> None:
        self.stream.close()


def _narrow_from(raw: bytes) -> Optional[int]:
    """Where wide text turns into UTF-8 in ``raw``, or None. UTF-16 text of ASCII is half NUL bytes: a chunk that
    is and ends so is passed at C speed, the search for the run kept for the chunks that may hold one."""
    if raw.count(b"\x00") >= 0.45 * len(raw) and not _NARROW_RUN.search(raw, max(0, len(raw) - 4096)):
        return None
    found = _NARROW_RUN.search(raw)
    return found.start() if found else None


class _Capped:
    """A gzip stream that ends after ``most`` bytes, saying so in ``notes``."""

    def __init__(self, stream, most: int, notes: List[str]) -> None:
        self.stream, self.left, self.most, self.notes = stream, most, most, notes

    def read(self, size: int = -1) -> bytes:
        if self.left <= 0:
            return b""
        data = self.stream.read(self.left if size < 0 else min(size, self.left))
        self.left -= len(data)
        if self.left <= 0 and self.stream.read(1):
            from preflight.units import format_bytes

            self.notes.append("the gzip file was expanded to %s and no further: the rest of the log (its end "
                              "among it) was not read" % format_bytes(self.most))
        return data

    def close(self) -> None:
        self.stream.close()


def _utf16_without_mark(head: bytes) -> Optional[str]:
    """UTF-16 of mostly ASCII text without a byte-order mark: every other byte NUL."""
    sample = head[:4096 - 4096 % 2]
    if len(sample) < 64:
        return None
    even, odd = sample[0::2], sample[1::2]
    if odd.count(0) > 0.4 * len(odd) and even.count(0) < 0.05 * len(even):
        return "utf-16-le"
    if even.count(0) > 0.4 * len(even) and odd.count(0) < 0.05 * len(odd):
        return "utf-16-be"
    return None


def _read_head(stream) -> bytes:
    head = b""
    while len(head) < SNIFF_BYTES:
        chunk = stream.read(SNIFF_BYTES - len(head))
        if not chunk:
            break
        head += chunk
    return head


def text_stream(stream: BinaryIO, name: str, notes: List[str]):
    """``stream`` as UTF-8 bytes to scan; how it was read is added to ``notes``. PreflightError (exit 2) when it is
    not a text log."""
    head = _read_head(stream)
    if head.startswith(b"\x1f\x8b"):
        if not name.endswith(".gz"):
            notes.append("read as gzip")
        unpacked = gzip.GzipFile(fileobj=_Prefixed(head, stream), mode="rb")  # type: ignore[arg-type]
        return text_stream(_Capped(unpacked, GZIP_EXPANDED, notes), name[:-3] if name.endswith(".gz") else name,
                           notes)
    if name.endswith(".gz"):
        notes.append("not gzip, though named .gz: read as it is")
    if head.startswith(codecs.BOM_UTF8):
        return _Prefixed(head[len(codecs.BOM_UTF8):], stream)
    for mark, encoding, words in _WIDE:
        if head.startswith(mark):
            notes.append("read as %s text" % words)
            return _Transcoded(_Prefixed(head[len(mark):], stream), encoding, notes, len(mark))
    encoding = _utf16_without_mark(head)
    if encoding:
        notes.append("read as %s text (no byte-order mark)" % encoding.upper().replace("-LE", " little-endian")
                     .replace("-BE", " big-endian"))
        return _Transcoded(_Prefixed(head, stream), encoding, notes)
    what = next((words for magic, words in _MAGIC if head.startswith(magic) or (magic == b"ustar" and
                                                                             head[257:262] == magic)), None)
    share = binary_share(head)
    if what or share > BINARY_SHARE:
        raise PreflightError(
            "%s is not a text log: %s" % (name, what or "%.0f%% of its first %d KiB are bytes no text holds "
                                          "(NUL and other control bytes)" % (100 * share, len(head) >> 10)),
            "give the training run's output (the file its stdout and stderr went to, or '-' with the text piped in)")
    return _Prefixed(head, stream)
