"""No import cycle anywhere in rlab/: every `import` and `from ... import` of every module counts, those inside
functions and under `if TYPE_CHECKING:` included (a lazy import only hides a cycle until it runs)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "rlab"


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """rlab module -> the rlab modules it imports (a `from pkg import name` names the submodule when there is one)."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base
                    for alias in node.names
                ]
            graph[name].update(t for t in targets if t in files and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each group of modules that import each other (a strongly connected component of more than one module), as
    one cycle through it (first module repeated at the end)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for start in sorted(graph):
        if start not in index:
            visit(start)
    return [_path_through(graph, group) for group in groups]


def _path_through(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A cycle inside `group`, found by walking from its first module until a module repeats."""
    path = [min(group)]
    while True:
        nxt = min(m for m in graph[path[-1]] if m in group)
        if nxt in path:
            return path[path.index(nxt) :] + [nxt]
        path.append(nxt)


PENDING: dict[frozenset[str], str] = {}
"""Cycles another branch in flight removes, each with who removes it; nothing else may stay."""


def test_the_graph_sees_lazy_imports() -> None:
    graph = import_graph()
    assert "rlab.orchestrate.tag_state" in graph["rlab.cli.ls_cmd"]  # imported inside a function
    assert "rlab.core.gpt" in graph["rlab.core.checkpoint"]  # under TYPE_CHECKING and inside load_model
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


def test_no_import_cycles() -> None:
    found = [c for c in cycles(import_graph()) if frozenset(c) not in PENDING]
    assert not found, "import cycle(s):\n" + "\n".join(" -> ".join(c) for c in found)


def test_no_command_module_imports_another() -> None:
    """`rlab/cli/*_cmd.py` parse one command's flags and render its output; what two commands share lives in a
    module of its own (a view in `rlab/cli/`, a rule in `rlab/orchestrate/` or `rlab/report/`)."""
    graph = import_graph()
    commands = {name for name in graph if name.startswith("rlab.cli.") and name.endswith("_cmd")}
    assert len(commands) > 10  # the pattern still names the command modules
    found = sorted(f"{name} -> {other}" for name in commands for other in sorted(graph[name] & commands))
    assert not found, "command module(s) importing another:\n" + "\n".join(found)
