"""Imports point one way: a module of vsplit never imports a module of a higher layer, and no modules import each
other in a cycle.

The layer contract, lowest first (:data:`LAYERS`). Each entry is a package or a module; a module belongs to the
longest entry that names it or one of its packages, so a package that straddles two layers today lists its higher
modules by name.

1. foundations, which import nothing of vsplit: the error tree (``vsplit.errors``), lazy package attributes
   (``vsplit.lazy``), atomic writes (``vsplit.atomic``), metrics (``vsplit.metrics``), strict JSON
   (``vsplit.strict_json``), damage-checked array files (``vsplit.npy_files``), the package version
   (``vsplit.version``) and the bootstrap behind an ensemble's weight rule (``vsplit.weight_rules``).
2. topology: a split as pure data (no torch); every layer above reads it.
3. blocks: what a party is built from, on topology and the foundations only: torch modules (``models``), its tables and
   ID files (``data``), the bundled data (``datasets``), run reports (``report``), the cut planner (``plan``) and the
   stability index (``monitor``, but not its process).
4. protocol: the sans-IO machines and messages, split training among them (on models and topology), and the
   homomorphic layer they share (``he``: encrypt, sum by groups, decrypt; on the foundations only).
5. wire: the codec and channels that carry protocol messages (``transport``), and the PSI machines (``psi``).
6. plug-ins: machines and hooks built on the protocol and the codec: secure aggregation and averaging
   (``federated``), the horizontal schedules' machines (``horizontal``), the attacks, defenses and detectors a
   party attaches to training (``privacy.attacks``, ``.defenses``, ``.detectors``, ``.hooks``, ``.accounting``,
   ``.images``), vertical boosted trees' machines and pooled reference (``boosting``, on ``he``) and the vertical
   scorecard's (``scorecard``, on ``he``).
7. runtime: what drives machines over channels: the pump, the in-process runner, the PSI runners, checkpoints and
   progress (``runtime``, but not its nodes).
8. application: one party's session, PSI then training then scoring (``app``, ``horizontal.session``), the party's
   data and models (``party``), its config (``config``, which checks defense and schedule names) and its joint
   explanation (``explain``: the machine, reason codes, calibration; but not its process).
9. front doors, where an application runs: the notebook estimators (``estimator``, and ``boosting_estimator``
   for boosted trees and ``scorecard_estimator`` for scorecards, outside their packages so those stay
   plug-ins), the horizontal runner of benchmarks, in one process or forked (``horizontal.run``) and one
   organization's process over mutual TLS for every topology (``node``: one node, its links, outputs and each
   topology family's program).
10. tools, experiments that drive a front door: baseline comparisons (``evaluation``), the privacy studies
    (``privacy``: ``audit``, ``redteam``, ``cut_study``, ``u_shaped``, ``topology_audit`` train with
    ``SplitClassifier``; their reports, pictures and data), pilots (``pilot``), online scoring (``serve``: the
    bank's service and the partners' daemons, on the node's model loading), a party process's explanation and
    monitoring (``explain.process``, ``monitor.process``) and its part in a search between organizations
    (``tune.trial``, ``tune.between``: trials run the node's program).
11. the command line (``cli``), 12. the package's front door (``vsplit``).

A package's ``__init__`` re-exports its contents, so it stands as high as its highest module (``vsplit.privacy``'s
is a tool, ``vsplit.psi``'s is on the wire and may not name the runtime). It also runs whenever any of its modules
is imported, so what it imports at module level must sit no higher than its lowest module; higher names it exports
lazily (:mod:`vsplit.lazy`).

What counts as an import: ``import`` and ``from ... import`` at module level and inside functions (a deferred
import is still a dependency), relative ones resolved, and the ``"vsplit.module:name"`` entries of a lazy table
(:mod:`vsplit.lazy`; an entry built at run time, such as ``vsplit.privacy.defenses``' f-strings, is not seen, nor is
a module name handed to ``python -m``). Imports under ``if TYPE_CHECKING:`` are exempt: they never run. The cycle
check leaves out the lazy tables too: an entry is imported on first use, after both modules have loaded, so it cannot
close an import-time loop (it still counts for the layers). The scan reads the source (``ast``) and imports nothing,
so the test takes a second or two.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: Where each importable package's source lives (vsplit.datasets lives outside vsplit/, see pyproject.toml).
ROOTS = {"vsplit": REPO / "vsplit", "vsplit.datasets": REPO / "datasets"}

#: The layer contract, lowest first: (name, entries). See the module docstring for the reasons.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundations", ("vsplit.errors", "vsplit.lazy", "vsplit.atomic", "vsplit.metrics", "vsplit.strict_json",
                     "vsplit.npy_files", "vsplit.version", "vsplit.weight_rules")),
    ("topology", ("vsplit.topology",)),
    ("blocks", ("vsplit.models", "vsplit.data", "vsplit.datasets", "vsplit.report", "vsplit.plan",
                "vsplit.monitor")),
    ("protocol", ("vsplit.protocol", "vsplit.he")),
    ("wire", ("vsplit.transport", "vsplit.psi")),
    ("plug-ins", (
        "vsplit.federated", "vsplit.horizontal", "vsplit.privacy.attacks", "vsplit.privacy.defenses",
        "vsplit.privacy.detectors", "vsplit.privacy.hooks", "vsplit.privacy.accounting", "vsplit.privacy.images",
        "vsplit.boosting", "vsplit.scorecard", "vsplit.woe",
    )),
    ("runtime", ("vsplit.runtime", "vsplit.console.state")),
    ("application", ("vsplit.app", "vsplit.horizontal.session", "vsplit.party", "vsplit.config", "vsplit.tune",
                     "vsplit.explain")),
    ("front doors", (
        "vsplit.estimator", "vsplit.bagging", "vsplit.horizontal.run", "vsplit.node", "vsplit.boosting_estimator",
        "vsplit.estimator_file", "vsplit.views_estimator", "vsplit.pooled_trees", "vsplit.ensemble",
        "vsplit.scorecard_estimator", "vsplit.woe.notebook", "vsplit.candidates",
    )),
    ("tools", ("vsplit.evaluation", "vsplit.baselines", "vsplit.privacy", "vsplit.pilot", "vsplit.serve",
               "vsplit.explain.process", "vsplit.monitor.process", "vsplit.tune.trial", "vsplit.tune.between",
               "vsplit.console")),
    ("cli", ("vsplit.cli",)),
    ("package", ("vsplit",)),
)

#: A lazy table's entry written out, "package.module:attribute" (it counts when the module exists).
_LAZY_TARGET = re.compile(r"([A-Za-z_][\w.]*):\w+")


@dataclass(frozen=True)
class Import:
    """``importer`` imports ``imported`` (both vsplit modules) at ``line``; ``how``: module, deferred or lazy."""

    importer: str
    imported: str
    line: int
    how: str

    def __str__(self) -> str:
        return f"{self.importer}:{self.line} imports {self.imported} ({self.how})"


def read_sources(roots: Mapping[str, Path] = ROOTS) -> dict[str, tuple[str, bool]]:
    """Every module under ``roots``: dotted name -> (source, is a package)."""
    sources = {}
    for package, root in roots.items():
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            name = ".".join([package, *(parts[:-1] if is_package else parts)])
            sources[name] = (path.read_text(encoding="utf-8"), is_package)
    return sources


def scan(sources: Mapping[str, tuple[str, bool]]) -> list[Import]:
    """Every import of one module of ``sources`` by another (see the module docstring for what counts)."""
    known = set(sources)
    found = []
    for module, (text, is_package) in sources.items():
        for name, line, how in _imports(ast.parse(text), module, is_package, known):
            target = _known_prefix(name, known)
            if target is not None and target != module:
                found.append(Import(module, target, line, how))
    return list(dict.fromkeys(found))  # "from a import b, c" is one import


def _imports(tree: ast.AST, module: str, is_package: bool, known: set[str]) -> list[tuple[str, int, str]]:
    here = module.split(".") if is_package else module.split(".")[:-1]
    found: list[tuple[str, int, str]] = []
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    while todo:
        node, deferred = todo.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend((child, deferred) for child in node.orelse)  # the body never runs
            continue
        deferred = deferred or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        how = "deferred" if deferred else "module"
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno, how) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*here[: len(here) - node.level + 1], *([node.module] if node.module else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.append(((submodule if submodule in known else base), node.lineno, how))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if (match := _LAZY_TARGET.fullmatch(node.value)) and match.group(1) in known:
                found.append((match.group(1), node.lineno, "lazy"))
        todo.extend((child, deferred) for child in ast.iter_child_nodes(node))
    return sorted(found, key=lambda f: f[1])


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _known_prefix(name: str, known: set[str]) -> str | None:
    """``name`` or its longest prefix that is a module of ``known`` (``a.b.attr`` -> ``a.b``)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def layer_of(sources: Mapping[str, tuple[str, bool]], layers: Sequence[tuple[str, Sequence[str]]]) -> dict[str, int]:
    """Each module's layer index under ``layers``; a package's ``__init__`` stands as high as its highest module."""
    index = {entry: i for i, (_, entries) in enumerate(layers) for entry in entries}
    out = {}
    for module in sources:
        owners = [e for e in index if module == e or module.startswith(e + ".")]
        if not owners:
            raise AssertionError(f"{module} is in no layer: add it (or its package) to the contract in {__file__}")
        out[module] = index[max(owners, key=len)]
    for module, (_, is_package) in sources.items():
        if is_package:
            out[module] = max(layer for m, layer in out.items() if m == module or m.startswith(module + "."))
    return out


def upward(imports: Iterable[Import], layers_of: Mapping[str, int]) -> list[Import]:
    """The imports of a module of a higher layer."""
    return [i for i in imports if layers_of[i.imported] > layers_of[i.importer]]


def through_front_doors(
    imports: Iterable[Import], layers_of: Mapping[str, int], sources: Mapping[str, tuple[str, bool]]
) -> list[tuple[Import, str]]:
    """The module-level imports of a package's ``__init__`` that sit above one of the package's modules, each with
    the lowest such module: importing that module runs the ``__init__`` and so imports a higher layer."""
    found = []
    for i in imports:
        if i.how == "module" and sources[i.importer][1]:
            inside = [m for m in sources if m.startswith(i.importer + ".")]
            lowest = min(inside, key=lambda m: (layers_of[m], m), default=None)
            if lowest is not None and layers_of[i.imported] > layers_of[lowest]:
                found.append((i, lowest))
    return found


def cycles(imports: Iterable[Import]) -> list[list[str]]:
    """The import cycles: every strongly connected set of two or more modules (lazy table entries left out)."""
    graph: dict[str, set[str]] = {}
    for i in imports:
        if i.how != "lazy":
            graph.setdefault(i.importer, set()).add(i.imported)
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out = []
    for start in sorted(graph):  # Tarjan's algorithm, iteratively
        if start in order:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        order[start] = low[start] = len(order)
        stack.append(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in order:
                    order[child] = low[child] = len(order)
                    stack.append(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in stack:
                    low[node] = min(low[node], order[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == order[node]:
                members = []
                while True:
                    member = stack.pop()
                    members.append(member)
                    if member == node:
                        break
                if len(members) > 1:
                    out.append(sorted(members))
    return sorted(out)


@pytest.fixture(scope="module")
def tree() -> tuple[dict[str, tuple[str, bool]], list[Import]]:
    sources = read_sources()
    return sources, scan(sources)


def test_no_vsplit_module_imports_a_higher_layer(tree):
    sources, imports = tree
    layers_of = layer_of(sources, LAYERS)
    found = [f"{i}: {LAYERS[layers_of[i.importer]][0]} -> {LAYERS[layers_of[i.imported]][0]}"
             for i in upward(imports, layers_of)]
    assert not found, "upward imports:\n" + "\n".join(found)


def test_no_package_front_door_imports_above_its_lowest_module(tree):
    sources, imports = tree
    layers_of = layer_of(sources, LAYERS)
    found = [f"{i}: importing {lowest} ({LAYERS[layers_of[lowest]][0]}) runs it; export the name lazily"
             for i, lowest in through_front_doors(imports, layers_of, sources)]
    assert not found, "front doors importing a higher layer:\n" + "\n".join(found)


def test_no_import_cycle_among_vsplit_modules(tree):
    _, imports = tree
    assert cycles(imports) == []


def test_every_entry_of_the_contract_names_a_module(tree):
    sources, _ = tree
    entries = [e for _, layer in LAYERS for e in layer]
    assert len(entries) == len(set(entries))
    assert [e for e in entries if e not in sources] == []


# The checker itself, on small synthetic trees: it does report what it is meant to.
TOY_LAYERS = (("low", ("pkg.low",)), ("high", ("pkg.high",)), ("top", ("pkg",)))


def toy(**modules: str) -> dict[str, tuple[str, bool]]:
    """A synthetic tree: ``low_a="source"`` is module ``pkg.low.a``; ``pkg.low``, ``pkg.high`` and ``pkg`` exist."""
    sources = {"pkg": ("", True), "pkg.low": ("", True), "pkg.high": ("", True)}
    sources |= {"pkg." + name.replace("_", "."): (text, False) for name, text in modules.items()}
    return sources


def toy_upward(sources: dict[str, tuple[str, bool]]) -> list[str]:
    return [str(i) for i in upward(scan(sources), layer_of(sources, TOY_LAYERS))]


def test_an_upward_import_at_module_level_is_reported():
    sources = toy(low_a="from pkg.high.b import thing\n", high_b="thing = 1\n")
    assert toy_upward(sources) == ["pkg.low.a:1 imports pkg.high.b (module)"]


def test_a_deferred_relative_or_lazy_upward_import_is_reported_and_a_type_checking_one_is_not():
    sources = toy(
        low_a="def f():\n    import pkg.high.b\n",
        low_c="from ..high import b\n",
        low_d='TABLE = {"thing": "pkg.high.b:thing"}\n',
        low_e="from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.high.b import thing\n",
        high_b="thing = 1\n",
    )
    assert toy_upward(sources) == [
        "pkg.low.a:2 imports pkg.high.b (deferred)",
        "pkg.low.c:1 imports pkg.high.b (module)",
        "pkg.low.d:1 imports pkg.high.b (lazy)",
    ]


def test_a_downward_import_passes_and_a_package_front_door_stands_with_its_highest_module():
    sources = toy(high_b="from pkg.low.a import x\n", low_a="x = 1\n")
    sources["pkg.low"] = ('TABLE = {"x": "pkg.low.a:x"}\n', True)
    assert toy_upward(sources) == []
    sources["pkg.low"] = ('TABLE = {"x": "pkg.high.b:x"}\n', True)  # a front door naming a higher layer
    assert toy_upward(sources) == ["pkg.low:1 imports pkg.high.b (lazy)"]


def test_a_front_door_importing_above_its_lowest_module_at_module_level_is_reported():
    sources = toy(low_a="x = 1\n", low_inner_b="y = 1\n", high_c="z = 1\n")
    sources["pkg.low.inner"] = ("from pkg.low.a import x\n", True)
    sources["pkg"] = ('from pkg.low.a import x\nfrom pkg.high.c import z\nTABLE = {"z": "pkg.high.c:z"}\n', True)
    layers_of = layer_of(sources, TOY_LAYERS)
    assert [(str(i), lowest) for i, lowest in through_front_doors(scan(sources), layers_of, sources)] == [
        ("pkg:2 imports pkg.high.c (module)", "pkg.low"),
    ]


def test_a_cycle_is_reported_even_through_a_deferred_import_but_not_through_a_lazy_table():
    sources = toy(low_a="import pkg.low.b\n", low_b="def f():\n    from pkg.low import a\n", low_c="")
    assert cycles(scan(sources)) == [["pkg.low.a", "pkg.low.b"]]
    sources = toy(low_a="import pkg.low.b\n", low_b='TABLE = {"a": "pkg.low.a:a"}\n')
    assert cycles(scan(sources)) == []


def test_a_module_outside_the_contract_is_refused():
    sources = toy(low_a="") | {"other": ("", False)}
    with pytest.raises(AssertionError, match="other is in no layer"):
        layer_of(sources, TOY_LAYERS)
