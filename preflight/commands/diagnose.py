"""preflight diagnose: read a failed run's log and name each known problem, with its cause and fix."""

from __future__ import annotations

import os
import sys
import zlib
from typing import List

import click

from preflight.commands import common
from preflight.commands.click_options import (COLORS, CONFIG, OUTPUT, PROBE, check_options, complete_files,
                                              format_names, one_facts_file, setting, shown, warn)
from preflight.commands.options import CheckOptions, OutputOptions
from preflight.engine import selection
from preflight.engine.model import PROFILES
from preflight.errors import PreflightError

_HINT = "give the path of a training log, or '-' to read standard input"


def open_log(path: str):
    """A binary stream of the log: a file, '-' for stdin, or a .gz file; exit 2 when it cannot be read."""
    if path == "-":
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:
            raise PreflightError("standard input is closed: there is no log to read", _HINT)
        return stream
    if os.path.isdir(path):
        raise PreflightError("%s is a folder, not a log file" % path, _HINT)
    try:
        return open(path, "rb")  # gzip, UTF-16 and what is not text at all are told by their bytes
    except FileNotFoundError:
        raise PreflightError("%s: no such file" % path, _HINT)
    except PermissionError:
        raise PreflightError("%s: permission denied" % path, "run as a user who can read it")
    except OSError as exc:
        raise PreflightError("%s: cannot read it: %s" % (path, exc), _HINT)


def _not_gzip(path: str, exc: BaseException) -> PreflightError:
    return PreflightError("%s: not a complete gzip file (%s)" % (path, exc or type(exc).__name__),
                          "decompress what there is with: zcat %s > log.txt" % path)


def run(path: str, options: CheckOptions, warn: common.Warn = None):
    """The diagnosis of the log at ``path``, its fixes made concrete with the facts options.facts_from allows
    (preflight.diagnose.whose_facts)."""
    from preflight.commands import pipeline, site
    from preflight.diagnose import diagnosis, log_input
    from preflight.diagnose.scan import LINE_SEARCHED, SEARCH_LIMIT, scan

    # The site configuration's rules and settings apply (facts_from among them); with --facts-from log this
    # machine is not looked at, so a [[match]] on its GPUs does not apply either.
    here = site.target(options) if options.facts_from == "log" else None
    prepared = pipeline.prepare(options, warn, target=here, kinds=("failures", "capacity"), checking=False)
    options, ruleset = prepared.options, prepared.ruleset
    mode = options.facts_from
    raw = open_log(path)
    read_as: List[str] = []
    gzipped = path.endswith(".gz")
    try:
        stream = log_input.text_stream(raw, "standard input" if path == "-" else path, read_as)
        gzipped = gzipped or "read as gzip" in read_as  # a damaged stream is then a damaged gzip file
        result = scan(stream, ruleset.log_entries(), clues=list(ruleset.clues.values()))
    except (EOFError, zlib.error) as exc:  # a damaged or truncated gzip stream
        raise _not_gzip(path, exc)
    except OSError as exc:  # a read error, or a damaged gzip stream
        if gzipped:
            raise _not_gzip(path, exc)
        raise PreflightError("%s: reading failed: %s" % (path, exc), "is the file complete and readable?")
    finally:
        if raw is not getattr(sys.stdin, "buffer", None):
            raw.close()
    if result.binary_bytes:
        read_as.append("lines of bytes that are not text (a binary stretch in the log, %s) were passed over"
                       % _size(result.binary_bytes))
    for line, length, passed in result.long_lines[:3]:
        read_as.append("line %d is %s long: its first %s and its last %s were searched, the %s between passed over"
                       % (line, _size(length), _size(LINE_SEARCHED), _size(length - LINE_SEARCHED - passed),
                          _size(passed)))
    if result.unsearched:
        read_as.append("its first %s and its last %s were searched, the %s between read past (a log that long "
                       "is searched at its start and its end)" % (_size(SEARCH_LIMIT), _size(len(result.tail)),
                                                                   _size(result.unsearched)))
    if len(result.long_lines) > 3:
        read_as.append("and %d more lines longer than %s, each searched the same way" % (
            len(result.long_lines) - 3, _size(LINE_SEARCHED)))
    found = diagnosis.findings(result)
    snapshot, facts_source = None, None
    if found and mode != "log":
        # What the log's clues are compared with (host, OS, Python, torch, GPUs, driver), and what fixes need.
        probes = diagnosis.probes_for(found, ruleset) | {"host", "python", "nvml"}
        if probes or options.facts_file:
            rules = [prepared.resolve(r) for f in found for r in f.failure.rules if r in ruleset.rules]
            snapshot, facts_source = common.snapshot(options, probes, selection.required_packages(rules),
                                                     prepared.applied.early_facts)
    label = "this machine" if not options.facts_file else "the snapshot %s" % options.facts_file
    completion = diagnosis.complete(found, ruleset, snapshot, prepared.resolve, result, mode, label, options.python)
    notes = ["the log was %s" % how if how.startswith("read") else how for how in read_as] + completion.notes
    return diagnosis.Diagnosis("stdin" if path == "-" else path, result, found, facts_source, notes,
                               completion.facts)


def _size(count: int) -> str:
    from preflight.units import format_bytes

    return format_bytes(count)


def main(path: str, options: CheckOptions, shown: OutputOptions, warn: common.Warn = None) -> int:
    from preflight.files.output import emit
    from preflight.render import formats

    found = run(path, options, warn)
    emit(formats.render("diagnosis", found, shown.format, color=shown.colored()), shown.output)
    return found.exit_code


# --- the command line ----------------------------------------------------------------------------------------

def build() -> click.Command:
    @click.command("diagnose")
    @click.argument("log", required=False, metavar="[LOG|-]", shell_complete=complete_files)
    @click.option("--format", "output_format", type=click.Choice(format_names("diagnosis")), default="text",
                  show_default=True)
    @click.option("--facts", "facts_file", metavar="FILE", multiple=True, callback=one_facts_file, shell_complete=complete_files,
                  help="Make fixes concrete with a saved snapshot instead of probing.")
    @setting("facts_from", default="auto", show_default=True)
    @click.option("--no-facts", is_flag=True, help="Do not look at this machine: the same as --facts-from log.")
    @setting("profile", type=click.Choice(PROFILES), metavar=None, default="train", show_default=True,
             help="Profile of the related check rules shown with each problem.")
    @click.option("--list", "list_catalog", is_flag=True, help="List the known failures instead of reading a log.")
    @click.option("--color", type=COLORS, default="auto", show_default=True)
    @OUTPUT
    @CONFIG
    @check_options(PROBE)
    def diagnose(options, log, output_format, no_facts, list_catalog, color, output) -> int:
        """Read a failed run's log (a file, '-' or a pipe) and name each known problem with its cause and fix.

        \b
        Exit codes: 0 nothing known found, 1 at least one known problem, 2 bad input.
        """
        if list_catalog:
            from preflight.commands import rules

            return rules.list_failures(options.rules_paths)
        if options.facts_file and (no_facts or options.facts_from == "log"):
            raise click.UsageError("--facts FILE and --no-facts (--facts-from log) contradict each other: give one")
        if no_facts:
            if "facts_from" in options.given and options.facts_from != "log":
                raise click.UsageError("--no-facts is --facts-from log; --facts-from %s contradicts it" % options.facts_from)
            options = options.replace(facts_from="log", given=options.given | {"facts_from"})
        if log is None:
            if sys.stdin is not None and sys.stdin.isatty():
                raise click.UsageError("give a log file, or pipe one in: preflight diagnose train.log / ... | preflight diagnose -")
            log = "-"
        return main(log, options, shown(output_format, output, color=color), warn)
    return diagnose
