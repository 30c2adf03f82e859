"""Stream a log and find the known failures in it.

The log is read in binary chunks and never held whole. Every catalog pattern
has a literal anchor; one compiled alternation of all anchors finds candidate
positions in the raw bytes, and only those lines are decoded (invalid UTF-8
replaced), stripped of ANSI colour codes, split at carriage returns (progress
bars redraw a line many times; the text is the last redraw that holds the
anchor), and matched against the full patterns. A line longer than
``MAX_LINE`` (binary garbage, a runaway progress bar) is looked at only
around each anchor, and a line longer than ``LINE_SEARCHED`` only in its first
``LINE_SEARCHED`` bytes and its last ``LINE_END`` (a progress bar's last redraw,
a message repeated without end): what lies between is read past, counted and
said, so that a log of one 1 GB line costs what 17 MiB of it would. A log longer
than ``SEARCH_LIMIT`` is searched in its first ``SEARCH_LIMIT`` bytes and read on
past them only to keep its end, which is searched too.

The last ``TAIL_BYTES`` of the log are kept so that an unrecognised log can
still show its last error-looking lines.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections import deque
from typing import BinaryIO, Deque, Dict, List, Optional, Set, Tuple

from preflight.diagnose.failures import Clue, Failure, normalize, normalize_bytes
from preflight.diagnose.families import MOST_ROWS, Family
from preflight.diagnose.log_input import binary_share

CHUNK = 4 << 20
MAX_LINE = 64 << 10     # longer lines are only looked at around a match
LINE_SEARCHED = 16 << 20  # a line's first bytes that are searched ...
LINE_END = 1 << 20      # ... and its last: the rest of a longer line is passed over (ScanResult.long_lines)
SEARCH_LIMIT = 4 << 30  # a log's first bytes that are searched; after them only its last TAIL_BYTES are
WINDOW = 2000           # bytes of context kept either side of a match in a huge line
AHEAD = 4 * WINDOW      # bytes after a match in a huge line looked at with it: later anchors there need no window
EXCERPT = 400           # characters of a matching line shown to the user
TAIL_BYTES = 256 << 10
TAIL_LINE = 4096        # bytes of one tail line looked at for error words
TAIL_TRIES = 64         # places of one anchor tried in each form of the forgiving pass over the tail
BINARY_LINE = 0.05      # a line (or window) with a larger share of bytes no text holds is not matched
DENSITY_SAMPLE = 64 << 10
DENSE = 0.1             # share of bytes that can begin an anchor above which one regex per first byte is used
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]|\x1b[=>]")
# "Error\b" finds the same lines as "[A-Za-z]*Error\b" in linear time (the prefix could be empty anyway).
# A heading, not a message: markdown's "# ...", a line framed by ===/---/***, or a short label ending in a colon.
_HEADING = re.compile(r"#{1,6}\s|([=*~#-])\1{2,}.*([=*~#-])\2{2,}$|[^:]{0,40}:$")
_ERRORISH = re.compile(r"Traceback|Error\b|Exception|\bFAILED\b|\bfailed\b|\bFatal\b|\bfatal\b|\bKilled\b|"
                       r"Segmentation fault|core dumped|\bERROR\b|\berror:")


def clean(raw: bytes, anchor: Optional[str] = None) -> str:
    """The visible text of a raw log line: decoded, no colour codes, the relevant carriage-return segment."""
    text = _ANSI.sub("", raw.decode("utf-8", "replace")).rstrip("\r\n")
    if "\r" in text:
        segments = [s for s in text.split("\r") if s.strip()]
        if anchor:
            holding = [s for s in segments if anchor in s]
            segments = holding or segments
        text = segments[-1] if segments else ""
    return text.replace("\x00", "")


class Hit:
    """The first occurrence of one failure, and how often it occurred."""

    def __init__(self, failure: Failure, line: int, excerpt: str, groups: Dict[str, str]) -> None:
        self.failure = failure
        self.line = line
        self.excerpt = excerpt
        self.groups = dict(groups)
        self.count = 1
        self.last_line = line


class ScanResult:
    def __init__(self) -> None:
        self.hits: Dict[str, Hit] = {}
        self.values: Dict[str, str] = {}  # what the log's clues say about its run (the last occurrence wins)
        self.clues: Set[str] = set()  # the ids of the clues the log showed
        self.value_lines: Dict[str, int] = {}
        self.lines = 0
        self.bytes = 0
        self.tail = b""
        self.tail_first_line = 1  # line number of the first complete line in ``tail``
        self.examined = 0  # bytes patterns were tried on (both passes): linear in the log's size
        self.binary_bytes = 0  # bytes of stretches that are not text, passed over
        self.long_lines: List[Tuple[int, int, int]] = []  # (line, its length, bytes of it not searched)
        self.unsearched = 0  # bytes after SEARCH_LIMIT, before the tail: read past, not searched

    def error_lines(self, most: int = 8) -> List[Tuple[int, str]]:
        """The last error-looking lines of the log, with their line numbers (a heading that only names errors,
        such as a pasted report's "## 报错信息 Error" or "===== Error log =====", is not one)."""
        found: List[Tuple[int, str]] = []
        for offset, raw in enumerate(self.tail.split(b"\n")):
            text = clean(raw[-TAIL_LINE:]).strip()  # the end of a huge line is what matters, and costs little
            if text and _ERRORISH.search(text) and not _HEADING.match(normalize(text)):
                found.append((self.tail_first_line + offset, _shorten(text)))
        return found[-most:]


def _lines_around(text: bytes, breaks: List[int], index: int) -> str:
    """Line ``index`` of ``text`` (``breaks``: where its line breaks are) with the lines either side, joined by
    spaces: how a match that a line break split is shown, where the joined window it was found in runs lines
    together without a gap."""
    start = breaks[index - 2] + 1 if index >= 2 else 0
    stop = breaks[index + 1] if index + 1 < len(breaks) else len(text)
    lines = (clean(line).strip() for line in text[start:stop].split(b"\n"))
    return " ".join(line for line in lines if line)


def _shorten(text: str) -> str:
    return text if len(text) <= EXCERPT else text[:EXCERPT - 3] + "..."


_COMMONEST = frozenset(b"etaoinsrhl")  # the commonest letters of English text, and of logs


def search_key(anchor: bytes) -> bytes:
    """The part of an anchor the whole-log search looks for: from its first letter (or backslash) on.

    The search stops at every byte of the log that can begin some anchor; punctuation that begins one (': ',
    '/', '.', ',', '[', a space) is on nearly every line of a log, and with such bytes among the first bytes the
    search ran at a third of its speed (measured with scripts/bench_diagnose.py). A line that holds the anchor
    holds this part of it, and the entry's pattern is checked on the whole line afterwards, so nothing is lost.
    The part keeps at least 3 bytes (else the whole anchor) so that it stays selective."""
    letters = [index for index, byte in enumerate(anchor)
               if 65 <= byte <= 90 or 97 <= byte <= 122 or byte == 92 or byte >= 128]  # letters, a backslash
    if not letters:
        return anchor
    # Better still a start that is not one of the commonest letters, if enough of the anchor follows it.
    for index in letters:
        if anchor[index] not in _COMMONEST and len(anchor) - index >= 5:
            return anchor[index:]
    rest = anchor[letters[0]:]
    return rest if len(rest) >= 3 or anchor[letters[0]] == 92 else anchor


@functools.lru_cache(maxsize=256)  # a scanner of the same catalog, built again in one process, compiles nothing
def _trie_regex(words: Tuple[bytes, ...]) -> "re.Pattern[bytes]":
    """One regex for many literals, shaped as a trie: at each position only the branches that share the next
    byte are tried (a plain alternation tries every literal at every position whose first byte could start one,
    which for lower-case text is most positions)."""
    trie: Dict[int, dict] = {}
    for word in words:
        node = trie
        for byte in word:
            node = node.setdefault(byte, {})
        node[-1] = {}

    def build(node) -> bytes:
        branches = [re.escape(bytes([byte])) + build(child) for byte, child in sorted(node.items()) if byte != -1]
        if not branches:
            return b""
        if len(branches) == 1 and -1 not in node:
            return branches[0]
        return b"(?:" + b"|".join(branches) + b")" + (b"?" if -1 in node else b"")

    return re.compile(build(trie))


class Literals:
    """Many byte strings to find in a text, found fast whatever the text. One trie-shaped regex of them all costs
    about 90 ns at every byte that can begin one; where such bytes are most of the text (prose, a huge line of
    letters, base64) one regex per first byte, each led by a literal the regex engine skips to, is several times
    faster (measured with scripts/bench_diagnose.py --shapes). Each text gets the faster of the two."""

    def __init__(self, words: List[bytes]) -> None:
        words = sorted(set(words), key=len, reverse=True)
        self.regex = _trie_regex(tuple(words))
        by_first: Dict[int, List[bytes]] = {}
        for word in words:
            by_first.setdefault(word[0], []).append(word)
        self.by_first = [_trie_regex(tuple(group)) for group in by_first.values()]
        self.firsts = [bytes([first]) for first in by_first]
        self.not_first = bytes(byte for byte in range(256) if byte not in by_first)

    def finder(self, text: bytes):
        """Something with ``search(text, position)`` giving the earliest, then longest, match from position."""
        sample = text[:DENSITY_SAMPLE]
        if not sample or len(sample.translate(None, self.not_first)) < DENSE * len(sample):
            return self.regex
        return _Merged(self.by_first, text)

    def finditer(self, text: bytes):
        """Non-overlapping matches from the start, as ``re.finditer`` gives them."""
        finder = self.finder(text)
        position = 0
        while True:
            found = finder.search(text, position)
            if found is None:
                return
            yield found
            position = max(found.end(), position + 1)


class Scanner:
    """The whole log is searched for the anchors as written (case-sensitive, raw bytes: fast); its last
    TAIL_BYTES again, forgivingly: case ignored, typographic quotes and markdown normalized, and lines joined
    where a terminal or a forum wrapped a message (see _search_tail). Clues are read in both passes: a thread
    writes "jetson nano" or "Jetpack 4.4" as often as the board's own spelling."""

    def __init__(self, failures: List[Failure], clues: List[Clue] = ()) -> None:
        self.by_anchor: Dict[bytes, List[Tuple[object, object]]] = {}
        self.by_key: Dict[bytes, List[Tuple[object, object]]] = {}  # lower-cased, normalized anchors
        for entry in list(failures) + list(clues):
            for pattern in entry.patterns:
                self.by_anchor.setdefault(search_key(pattern.anchor.encode("utf-8")), []).append((entry, pattern))
                self.by_key.setdefault(pattern.key.encode("utf-8"), []).append((entry, pattern))
        self.keys = Literals(list(self.by_key)) if self.by_key else None
        self.anchors = Literals(list(self.by_anchor)) if self.by_anchor else None
        self.overlap = max((len(a) for a in self.by_anchor), default=1)

    def scan(self, stream: BinaryIO, chunk_size: int = CHUNK) -> ScanResult:
        result = ScanResult()
        tail: Deque[bytes] = deque()
        tail_size = 0
        buffer = b""
        line_base = 1   # line number of buffer[0]
        tail_lines_dropped = 0
        before = 0      # bytes of the unfinished line at buffer[0] that are no longer in the buffer
        open_end = False  # the log's last byte read past SEARCH_LIMIT is not a newline
        passed = 0      # of those, bytes not searched (beyond LINE_SEARCHED)
        while True:
            chunk = stream.read(chunk_size)
            if not chunk:
                break
            result.bytes += len(chunk)
            tail.append(chunk)
            tail_size += len(chunk)
            while tail_size - len(tail[0]) >= TAIL_BYTES:
                dropped = tail.popleft()
                tail_size -= len(dropped)
                tail_lines_dropped += dropped.count(b"\n")
            if result.bytes - len(chunk) >= SEARCH_LIMIT:  # read past: only the tail is searched, at the end
                line_base += chunk.count(b"\n")
                open_end = not chunk.endswith(b"\n")
                result.unsearched += len(chunk) + len(buffer)  # and the unfinished line before it
                buffer = b""
                continue
            buffer += chunk
            cut = buffer.rfind(b"\n")
            if cut == -1:
                if before + len(buffer) > LINE_SEARCHED:
                    # Past the searched start of a huge line: only its last LINE_END bytes are kept for later.
                    keep = max(0, len(buffer) - LINE_END)
                    if before < LINE_SEARCHED:  # the rest of its searched start first
                        self._search(buffer, min(keep, LINE_SEARCHED - before), line_base, result)
                    passed += max(0, keep - max(0, LINE_SEARCHED - before))
                    before += keep
                    buffer = buffer[keep:]
                elif len(buffer) > MAX_LINE:
                    # One huge line: look at all but the last few bytes, which may hold half an anchor.
                    keep = len(buffer) - self.overlap
                    self._search(buffer, keep, line_base, result)
                    before += keep
                    buffer = buffer[keep:]
                continue
            self._search(buffer, cut + 1, line_base, result)
            if passed:
                result.long_lines.append((line_base, before + buffer.find(b"\n") + 1, passed))
            before = passed = 0
            line_base += buffer.count(b"\n", 0, cut + 1)
            buffer = buffer[cut + 1:]
        if buffer and not result.unsearched:
            self._search(buffer, len(buffer), line_base, result)
            if passed:
                result.long_lines.append((line_base, before + len(buffer), passed))
        result.lines = line_base - 1 + (1 if buffer or open_end else 0)
        joined = b"".join(tail)
        first_newline = joined.find(b"\n") if tail_lines_dropped else -1
        result.tail = joined[first_newline + 1:] if tail_lines_dropped else joined
        result.tail_first_line = tail_lines_dropped + (2 if tail_lines_dropped else 1)
        if result.unsearched:  # the end, searched as every line before SEARCH_LIMIT was
            result.unsearched = max(0, result.unsearched - len(result.tail))
            self._search(result.tail, len(result.tail), result.tail_first_line, result)
        self._search_tail(result)
        return result

    def _search_tail(self, result: ScanResult) -> None:
        """The log's end, searched again for the failures not found yet, as real text varies: case ignored
        (``nvml error: driver/library version mismatch``), typographic quotes and markdown emphasis normalized,
        and lines joined without and with a space at each break, for a message a terminal or a forum wrapped
        over two lines ("Bus" / "error", "unsatisfied condi" / "tion"). The end is where a crash speaks, and
        it keeps this pass bounded whatever the log's size.

        Linear, however often an anchor repeats: each line is tried once per anchor (a long line only around
        the anchor, windows moving on by at least WINDOW/4), a joined window only where a line break is near
        the anchor (elsewhere joining changes nothing), and only the last TAIL_TRIES places of each anchor in
        each form are tried (the newest, where the crash is)."""
        if self.keys is None or not result.tail:
            return

        text = normalize_bytes(result.tail).replace(b"\r\n", b"\n")
        breaks = [found.start() for found in re.finditer(b"\n", text)]
        shifted = [position - count for count, position in enumerate(breaks)]  # where each break was, joined
        for glue in (None, b"", b" "):
            joined = text if glue is None else text.replace(b"\n", glue)
            places: Dict[bytes, Deque[Tuple[int, int, int]]] = {}  # key -> (start, stop, original position)
            moved_on: Dict[bytes, int] = {}
            for found in self.keys.finditer(joined.lower()):
                key = found.group(0)
                if found.start() < moved_on.get(key, -1):
                    continue  # inside the window tried for an earlier place of this anchor
                if glue is None:  # one line, as it is; a long line only around the anchor
                    start = joined.rfind(b"\n", 0, found.start()) + 1
                    stop = joined.find(b"\n", found.end())
                    stop = len(joined) if stop == -1 else stop
                    if stop - start > 2 * WINDOW:
                        start, stop = max(start, found.start() - WINDOW), min(stop, found.end() + WINDOW)
                        moved_on[key] = found.end() + WINDOW // 2
                    else:
                        moved_on[key] = stop
                    original = found.start()
                else:
                    original = found.start() + (bisect.bisect_right(shifted, found.start()) if not glue else 0)
                    near = bisect.bisect_left(breaks, original - WINDOW // 4)
                    if near >= len(breaks) or breaks[near] > original + WINDOW // 4:
                        continue  # no line break nearby: joining changes nothing here
                    start, stop = max(0, found.start() - WINDOW // 2), found.end() + WINDOW // 2
                    moved_on[key] = found.end() + WINDOW // 4
                places.setdefault(key, deque(maxlen=TAIL_TRIES)).append((start, stop, original))
            for key, tried in places.items():
                for start, stop, original in tried:
                    candidates = [c for c in self.by_key[key]
                                  if (c[0].id not in result.hits or _is_family(c[0])) and c[0].id not in result.clues]
                    if not candidates:
                        break
                    window = clean(joined[start:stop])
                    result.examined += stop - start
                    index = bisect.bisect_left(breaks, original)
                    line = result.tail_first_line + index
                    for failure, pattern in candidates:
                        groups = pattern.match(window)
                        if groups is None:
                            continue
                        if isinstance(failure, Clue):  # what the exact pass read stands; this only adds to it
                            result.clues.add(failure.id)
                            for name, value in dict(failure.values, **groups).items():
                                result.values.setdefault(name, value)
                            continue
                        shown = _lines_around(text, breaks, index) if glue is not None else window
                        if _is_family(failure):
                            _family_hit(failure, groups, line, shown, result, new_only=True)
                        elif failure.id not in result.hits:
                            result.hits[failure.id] = Hit(failure, line, _shorten(shown.strip()), groups)

    def _search(self, buffer: bytes, end: int, line_base: int, result: ScanResult) -> None:
        if self.anchors is None:
            return
        finder = self.anchors.finder(buffer)
        position = 0
        counted_to, line = 0, line_base
        while True:
            # Matches must *start* before ``end``; the bytes after it are looked at again next time.
            found = finder.search(buffer, position)
            if found is None or found.start() >= end:
                return
            # The line around the match, looked for no further than MAX_LINE each way: in a huge line a search
            # to its far ends at every match would cost the line's length each time.
            lowest = max(0, found.start() - MAX_LINE - 1)
            start = buffer.rfind(b"\n", lowest, found.start()) + 1 or lowest
            highest = min(len(buffer), found.start() + MAX_LINE + 1)
            stop = buffer.find(b"\n", found.start(), highest)
            stop = highest if stop == -1 else stop
            line += buffer.count(b"\n", counted_to, start)
            counted_to = start
            if stop - start > MAX_LINE:
                start = max(start, found.start() - WINDOW)
                if stop > found.end() + AHEAD:
                    stop = found.end() + AHEAD
                    # Anchors up to WINDOW/2 before this window's end are covered by it, with at least WINDOW
                    # of text before them (a match longer than that is not expected); the next search starts
                    # there, so windows advance by about AHEAD and each byte is looked at about once, however
                    # often the anchor repeats.
                    position = max(found.end(), stop - WINDOW // 2)
                else:
                    position = stop + 1  # the window reaches the line's end: every anchor left in it is covered
            else:
                position = stop + 1
            raw = buffer[start:stop]
            if binary_share(raw) > BINARY_LINE:  # bytes no message holds (a binary stretch in the log): passed over
                result.binary_bytes += len(raw)
            else:
                result.examined += stop - start
                self._match_line(raw, line, result)
            if position >= end:
                return

    def _match_line(self, raw: bytes, line: int, result: ScanResult) -> None:
        present = {first for first in self.anchors.firsts if first in raw}  # a few byte searches rule out most anchors
        for anchor, candidates in self.by_anchor.items():
            if anchor[:1] not in present or anchor not in raw:
                continue
            text = clean(raw, anchor.decode("utf-8"))
            for failure, pattern in candidates:
                groups = pattern.match(text)
                if groups is None:
                    continue
                if isinstance(failure, Clue):
                    result.clues.add(failure.id)
                    found = dict(failure.values, **groups)
                    result.values.update(found)
                    result.value_lines.update((name, line) for name in found)
                    continue
                if _is_family(failure):
                    _family_hit(failure, groups, line, text, result)
                    continue
                hit = result.hits.get(failure.id)
                if hit is None:
                    result.hits[failure.id] = Hit(failure, line, _shorten(text.strip()), groups)
                else:
                    if hit.last_line != line:
                        hit.count += 1
                        hit.last_line = line
                    for name, value in groups.items():
                        hit.groups.setdefault(name, value)


class _Merged:
    """The earliest match of several regexes in one buffer, as one regex's ``search`` would give it: each regex
    is searched again only once the position passes its last match, so the buffer is scanned once per regex
    however often this is asked."""

    def __init__(self, regexes: List["re.Pattern[bytes]"], buffer: bytes) -> None:
        self.regexes = regexes
        self.buffer = buffer
        self.next: List[object] = [None] * len(regexes)  # None: not searched yet; False: no match left

    def search(self, buffer: bytes, position: int):
        best = None
        for index, regex in enumerate(self.regexes):
            found = self.next[index]
            if found is False:
                continue
            if found is None or found.start() < position:
                found = regex.search(self.buffer, position) or False
                self.next[index] = found
                if found is False:
                    continue
            if best is None or found.start() < best.start() or (found.start() == best.start()
                                                                 and found.end() > best.end()):
                best = found
        return best


def _is_family(entry) -> bool:
    return isinstance(entry, Family)


def _family_hit(family: Family, groups: Dict[str, str], line: int, text: str, result: ScanResult, new_only: bool = False) -> None:
    """A family's value found on a line: a hit per table row (a value the table does not know is none)."""
    row = family.row(groups)
    if row is None:
        return
    key = family.hit_key(groups, row)
    hit = result.hits.get(key)
    if hit is not None:
        if not new_only and hit.last_line != line:
            hit.count += 1
            hit.last_line = line
        return
    if sum(1 for existing in result.hits.values() if existing.failure.id == family.id) >= MOST_ROWS:
        return
    result.hits[key] = Hit(family.entry(groups, row), line, _shorten(text.strip()), groups)


def scan(stream: BinaryIO, failures: List[Failure], chunk_size: int = CHUNK, clues: List[Clue] = ()) -> ScanResult:
    return Scanner(failures, clues).scan(stream, chunk_size)
