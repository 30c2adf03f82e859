"""The shape of the code: the layers docs/architecture.md names, and no import cycle.

Every import statement counts, those inside functions too (a lazy import
still ties two modules together). The layer test and the package cycle test
count ``if TYPE_CHECKING:`` imports as well; the module cycle test leaves them
out (they never run).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

PACKAGE = Path(__file__).resolve().parent.parent / "preflight"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _runtime_nodes(tree: ast.AST):
    """Every node that can run: all of them but the bodies of ``if TYPE_CHECKING:`` (annotations only)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and getattr(child.test, "id", None) == "TYPE_CHECKING":
                stack.extend(child.orelse)
                continue
            stack.append(child)


def import_graph(type_only: bool = False) -> Dict[str, Set[str]]:
    """Module -> the preflight modules it imports, read from every import statement (at any depth); with
    ``type_only``, the ``if TYPE_CHECKING:`` ones too."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: Dict[str, Set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: Set[str] = set()
        tree = ast.parse(path.read_text(), str(path))
        for node in (ast.walk(tree) if type_only else _runtime_nodes(tree)):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in node.names:
                    # "from preflight.x import y": y may be a module or a name in x.
                    full = "%s.%s" % (base, alias.name)
                    targets.add(full if full in modules else base)
        graph[name] = {t for t in targets if t in modules and t != name}
        # Importing a.b.c runs a/__init__ and a/b/__init__ too; those are not cycles of ours unless they import back.
    return graph


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Every elementary cycle's strongly connected component, as a sorted list of modules (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_import_graph_has_no_cycle():
    assert cycles(import_graph()) == []


# --- the layers of docs/architecture.md --------------------------------------------------------------------

ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def layer_table() -> List[Tuple[int, List[str]]]:
    """(layer, paths) for each row of the doc's layer table; paths end in / for a package."""
    rows = []
    for line in ARCHITECTURE.read_text().splitlines():
        match = re.match(r"^\|\s*(\d+)\s*\|([^|]*)\|", line)
        if match:
            rows.append((int(match.group(1)), re.findall(r"`(preflight/[^`]*)`", match.group(2))))
    return rows


def layers() -> Dict[str, int]:
    """Module -> its layer: the most specific path of the table that covers its file."""
    table = layer_table()
    placed: Dict[str, int] = {}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE.parent).as_posix()
        best: Optional[Tuple[int, int]] = None
        for layer, paths in table:
            for entry in paths:
                if relative == entry or (entry.endswith("/") and relative.startswith(entry)):
                    if best is None or len(entry) > best[1]:
                        best = (layer, len(entry))
        if best is not None:
            placed[module_name(path)] = best[0]
    return placed


def test_the_doc_places_every_module_in_a_layer():
    placed = layers()
    unplaced = sorted(set(module_name(path) for path in PACKAGE.rglob("*.py")) - set(placed))
    assert len(layer_table()) >= 10, "the layer table of docs/architecture.md was not found"
    assert not unplaced, "docs/architecture.md places no layer for: %s" % ", ".join(unplaced)


def test_no_import_goes_up_a_layer():
    """Layer 1 is the top (the command line); a module imports its own layer or the ones below, nothing above,
    type-only imports included."""
    placed = layers()
    upward = ["%s (layer %d) imports %s (layer %d)" % (module, placed[module], target, placed[target])
              for module, targets in sorted(import_graph(type_only=True).items())
              for target in sorted(targets) if placed[target] < placed[module]]
    assert not upward, "\n".join(upward)


def test_the_layer_check_finds_an_upward_import():
    graph = import_graph(type_only=True)
    placed = layers()
    assert placed["preflight.cli"] == 1 and placed["preflight.errors"] == max(placed.values())
    assert "preflight.facts.view" in graph["preflight.engine.evaluate"]  # reads real imports, downward
    assert placed["preflight.engine.evaluate"] < placed["preflight.facts.view"]


def package_of(module: str) -> str:
    """preflight.engine.loader -> preflight.engine; preflight.report -> preflight.report."""
    parts = module.split(".")
    return ".".join(parts[:2])


def test_no_package_imports_another_in_a_cycle_type_only_imports_included():
    packages: Dict[str, Set[str]] = {}
    for module, targets in import_graph(type_only=True).items():
        source = package_of(module)
        packages.setdefault(source, set()).update(package_of(t) for t in targets if package_of(t) != source)
    assert cycles(packages) == []


def test_the_cycle_finder_finds_cycles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph = import_graph()
    assert "preflight.engine.loader" in graph["preflight.commands.pipeline"]  # it reads real imports


def test_type_checking_imports_are_not_runtime_edges():
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\nelse:\n    import b\n")
    names = {alias.name for node in _runtime_nodes(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert names == {"b"}


def test_value_classes_are_immutable_with_readable_repr_and_equality():
    from preflight.capacity.planning import Plan, Row
    from preflight.capacity.workloads import Estimate, Workload
    from preflight.commands.options import CheckOptions, OutputOptions, WorkloadOptions
    from preflight.diagnose.failures import Failure, Pattern
    from preflight.engine.compare import PackageSpec, Param, Verdict
    from preflight.engine.evaluate import Result
    from preflight.engine.fix import Fix
    from preflight.engine.loader import load
    from preflight.engine.model import ResolvedRule, Rule
    from preflight.facts.collect import Options
    from preflight.facts.conditions import Condition
    from preflight.facts.registry import Fact
    from preflight.knowledge.gpus import GpuModel

    for cls in (Estimate, GpuModel, Workload, CheckOptions, OutputOptions, WorkloadOptions, Failure, Pattern,
                PackageSpec, Param, Verdict, Result, Fix, Rule, ResolvedRule, Options, Condition, Fact, Plan, Row):
        assert issubclass(cls, tuple) and hasattr(cls, "_fields"), cls  # NamedTuple: frozen, repr and == for free
    rule = load().rules["driver.version"]
    try:
        rule.severity = "info"
    except AttributeError:
        pass
    else:
        raise AssertionError("a loaded rule can be changed")
    fix = Fix("x", "title", ["step"], ["cmd"], "origin")
    assert fix == Fix("x", "title", ["step"], ["cmd"], "origin")
    assert repr(fix) == "Fix(id='x', title='title', steps=['step'], commands=['cmd'], origin='origin', changes='')"
    assert CheckOptions(profile="node", select=["gpu"]) == CheckOptions(profile="node", select=("gpu",))


# Commands that write no document of their own through render.formats, each with why. A new command that writes one
# takes its --format choices from render.formats.names(kind); one that does not must be named here, with its reason.
WRITES_NO_DOCUMENT = {
    "completion": "a shell script, as click makes it",
    "schema": "a JSON Schema file, as shipped in preflight/schemas",
    "explain": "one catalog entry in full, as text",
    "serve": "answers over HTTP; its /report is check's report, rendered by render.formats",
    "slurm": "acts on the node; its report goes to --report-dir and the system log as check's does",
    "config validate": "the problems it finds, one line each, as a linter prints them",
}


def _leaf_commands():
    import click

    from preflight.cli import COMMANDS, command

    for name in COMMANDS:
        built = command(name)
        if isinstance(built, click.Group):
            for sub in built.list_commands(None):
                yield "%s %s" % (name, sub), built.get_command(None, sub)
        else:
            yield name, built


def test_every_command_that_writes_a_document_takes_its_formats_from_the_renderers():
    import click

    from preflight.render.formats import RENDERERS, names

    for name, built in _leaf_commands():
        formats = [p for p in built.params if p.name == "output_format"]
        if not formats:
            assert name in WRITES_NO_DOCUMENT, "%s: no --format; render its document through render.formats, or say " \
                                               "in WRITES_NO_DOCUMENT why it writes none" % name
            continue
        assert name not in WRITES_NO_DOCUMENT, "%s has --format now: take it out of WRITES_NO_DOCUMENT" % name
        choices = set(formats[0].type.choices) if isinstance(formats[0].type, click.Choice) else set()
        assert any(choices and choices <= set(names(kind)) for kind in RENDERERS), \
            "%s: --format %s is not the formats of one kind of document in render.formats" % (name, sorted(choices))


def test_the_command_line_module_declares_no_command():
    """cli.py assembles the commands and maps errors to exit codes; each command's options and policy live in its
    own module under preflight/commands/ (the one option here is the group's --version)."""
    text = (PACKAGE / "cli.py").read_text()
    assert len(text.splitlines()) <= 500, "preflight/cli.py has grown past 500 lines: move command code to its module"
    assert text.count("click.option(") == 1 and "click.command(" not in text


def test_pyproject_lists_every_package_the_source_has():
    """setuptools installs only the packages pyproject.toml lists (preflight.default_rules is rules/, mapped): a new
    package folder left out would be missing from the wheel while every test here, run from the source, passes."""
    text = (PACKAGE.parent / "pyproject.toml").read_text()
    listed = set(re.findall(r'"(preflight[\w.]*)"', re.search(r"\npackages = \[(.*?)\]", text, re.S).group(1)))
    found = {".".join(path.relative_to(PACKAGE.parent).parts[:-1]) for path in PACKAGE.rglob("__init__.py")}
    assert listed == found | {"preflight.default_rules"}, (sorted(found - listed), sorted(listed - found))


def test_every_package_says_what_it_holds():
    silent = [str(path.relative_to(PACKAGE.parent)) for path in PACKAGE.rglob("__init__.py")
              if not ast.get_docstring(ast.parse(path.read_text()))]
    assert not silent, "a package's __init__.py says in its docstring what the folder holds: %s" % silent
