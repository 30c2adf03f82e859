"""The shape of the code: the import graph of preflight/ has no cycle.

Every import statement counts, those inside functions too (a lazy import
still ties two modules together); only ``if TYPE_CHECKING:`` blocks, which
never run, are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

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


def import_graph() -> Dict[str, Set[str]]:
    """Module -> the preflight modules it imports, read from every import statement (at any depth)."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: Dict[str, Set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: Set[str] = set()
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
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


def test_the_cycle_finder_finds_cycles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph = import_graph()
    assert "preflight.engine.loader" in graph["preflight.commands.common"]  # it reads real imports


def test_type_checking_imports_are_not_runtime_edges():
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\nelse:\n    import b\n")
    names = {alias.name for node in _runtime_nodes(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert names == {"b"}


def test_value_classes_are_immutable_with_readable_repr_and_equality():
    from preflight.capacity.workloads import Estimate, GpuModel, Workload
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
    from preflight.capacity.planning import Plan, Row

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
    assert repr(fix) == "Fix(id='x', title='title', steps=['step'], commands=['cmd'], origin='origin')"
    assert CheckOptions(profile="node", select=["gpu"]) == CheckOptions(profile="node", select=("gpu",))
