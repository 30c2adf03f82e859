"""Text shown to a person: ``printable`` escapes what a terminal would act on, ``say`` is the one door to standard
error. Messages carry values from files, environment variables, hosts and logs (an ESC sequence in a node name, a
cache path or a URL would otherwise retitle or clear the terminal, or fake a line of output)."""

from __future__ import annotations

import sys


def printable(text: str) -> str:
    """``text`` with every character a terminal or viewer would act on shown as an escape instead: control
    characters (ESC sequences that retitle or clear a terminal, a newline that fakes a report line or a Markdown
    heading, NUL), and invisible format characters such as bidirectional overrides. Text from hosts, logs and
    files passes through here in every text-like format; JSON escapes by itself."""
    if text.isprintable():
        return text
    out = []
    for character in text:
        if character.isprintable():
            out.append(character)
        else:
            code = ord(character)
            out.append("\\x%02x" % code if code < 0x100 else "\\u%04x" % code if code < 0x10000 else "\\U%08x" % code)
    return "".join(out)


def printable_lines(text: str) -> str:
    """As ``printable``, keeping the message's own line breaks (a hint on its own line)."""
    return "\n".join(printable(line) for line in text.split("\n"))


def say(text: str) -> None:
    """Write ``text`` (a message, a warning, a log line) to standard error, escaped, as one line or several."""
    stream = sys.stderr
    if stream is None:
        return
    try:
        stream.write(printable_lines(text.rstrip("\n")) + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass  # standard error closed or full: nowhere left to say it
