"""The import picture stays true: no cycle between modules, and no import from a lower layer into a higher
one. The layer order is written here, once: each package may import only the packages before it.

Every `import` and `from ... import` counts, at module level or inside a function (a lazy import is still a
dependency). Relative imports are resolved; `from pkg import name` is an edge to `pkg.name` when that is a
module, else to `pkg` itself. Importing a module by name as a string (`importlib.import_module`, the lazy
command dispatcher and the demo's step list in manifests/) is how the bottom layer reaches the others without
depending on them, and is not an edge.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.conftest import REPO

LAYERS = ["manifests", "corpus", "synth", "training", "evals"]


def modules() -> dict[str, Path]:
    found = {}
    for package in LAYERS:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, node: ast.AST, known: dict[str, Path]) -> list[str]:
    """The project modules that one import statement of module `name` (file `path`) depends on."""
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join(package + ([base] if base else []))
        targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    out = []
    for target in targets:
        while target and target not in known:  # `import a.b.c` of a module inside a package
            target = target.rpartition(".")[0]
        if target and target != name:
            out.append(target)
    return out


def import_graph() -> dict[str, set[str]]:
    known = modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[name].update(imported(name, path, node, known))
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
    return found


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_no_import_runs_up_the_layers():
    rank = {package: i for i, package in enumerate(LAYERS)}
    upward = sorted(f"{source} -> {target}" for source, targets in import_graph().items() for target in targets
                    if rank[target.split(".")[0]] > rank[source.split(".")[0]])
    assert upward == []


def test_the_checker_finds_what_it_is_for():
    """The checker itself, on a made-up graph: a two-module cycle and a three-module one are reported."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}
    assert sorted(cycles(graph)) == [["a", "b"], ["c", "d", "e"]]
    known = {"corpus": Path("corpus/__init__.py"), "corpus.stage": Path("corpus/stage.py"),
             "corpus.web": Path("corpus/web/__init__.py"), "corpus.web.extract": Path("corpus/web/extract.py")}
    node = ast.parse("from ..stage import Stage\nfrom . import extract\nimport corpus.web.extract.x").body
    path = Path("corpus/web/blocks.py")
    assert imported("corpus.web.blocks", path, node[0], known) == ["corpus.stage"]
    assert imported("corpus.web.blocks", path, node[1], known) == ["corpus.web.extract"]
    assert imported("corpus.web.blocks", path, node[2], known) == ["corpus.web.extract"]
