"""No import circle among memstream's modules: a module that imports another never gets
imported back by it, directly or through others. Imports for the type checker count too
(a circle in the types is still two modules that must be read together)."""

from __future__ import annotations

import grimp


def circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative: the package's import chains are deeper than the recursion limit cares for)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle_among_the_modules():
    graph = grimp.build_graph("memstream", exclude_type_checking_imports=False)
    found = circles(graph)
    shown = [" <-> ".join(c) for c in found]
    assert not found, "import circles: " + "; ".join(shown)


def test_a_circle_is_found():
    graph = grimp.ImportGraph()
    for name in ("pkg", "pkg.port", "pkg.backend", "pkg.other"):
        graph.add_module(name)
    graph.add_import(importer="pkg.port", imported="pkg.backend")
    graph.add_import(importer="pkg.backend", imported="pkg.port")
    graph.add_import(importer="pkg.other", imported="pkg.port")
    assert circles(graph) == [["pkg.backend", "pkg.port"]]
