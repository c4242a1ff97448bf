"""The package's import graph is a tree: no module imports itself back through others, the
core and the library API never import a shell, only the CLI imports the shells, and the
encoders import nothing of the package but the model (translator.model) and each other.
And the suite's own: no module of tests/ imports a test module (shared helpers live in
conftest.py and tests/support/, which hold no tests).

Read from the source with `ast` (nothing is imported): every `import`/`from` of a translator
module counts, at module level or inside a function (a lazy import is still an edge); those
under `if TYPE_CHECKING:` count for the type checker's graph, which must be a tree as well.

And no module reaches into another object's private members (`obj._x` where `obj` is not
`self`, `cls` or a module): the few that must (a library's own, with no public door) say why
on their line, after `# reach-in:`."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import translator

ROOT = Path(translator.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(tree: ast.AST, name: str, is_package: bool, modules: set[str], typing: bool = False) -> set[str]:
    """The modules `name` imports when it runs (`from pkg import mod` imports mod; `from pkg
    import thing` imports pkg); with `typing`, those the type checker reads too."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if not typing and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = {f"{base}.{alias.name}" for alias in node.names}
            found.update(names & modules)
            if names - modules:
                found.add(base)
        for inner in ast.iter_child_nodes(node):
            visit(inner)

    visit(tree)
    return found


def graph(typing: bool = False) -> dict[str, set[str]]:
    paths = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}
    edges: dict[str, set[str]] = {}
    for name, path in paths.items():
        tree = ast.parse(path.read_text(), str(path))
        targets = runtime_imports(tree, name, path.name == "__init__.py", set(paths), typing)
        edges[name] = {t for t in targets if t in paths and t != name}
    return edges


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the modules on it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := walk(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (found := walk(start)):
            return found
    return None


def is_shell(name: str) -> bool:
    return name == "translator.shell" or name.startswith("translator.shell.")


def is_cli(name: str) -> bool:
    return name == "translator.cli" or name.startswith("translator.cli.")


def is_encoder(name: str) -> bool:
    return name == "translator.encoders" or name.startswith("translator.encoders.")


LEAVES = {"translator.model", "translator.version"}  # what an encoder may import beside the encoders


def beyond_the_model(edges: dict[str, set[str]]) -> dict[str, list[str]]:
    """Each encoder module's imports of translator modules other than the model and encoders."""
    found = {
        name: sorted(dep for dep in deps if dep not in LEAVES and not is_encoder(dep))
        for name, deps in edges.items()
        if is_encoder(name)
    }
    return {name: deps for name, deps in found.items() if deps}


def test_the_graph_is_read() -> None:
    """Lazy imports count, type-only ones only in the type checker's graph (else the tests
    below could pass on nothing)."""
    edges = graph()
    assert "translator.shell.metrics" not in edges["translator.shell.sink"]  # under TYPE_CHECKING only
    assert "translator.shell.metrics" in graph(typing=True)["translator.shell.sink"]
    assert {"translator.shell.modes", "translator.shell.replay"} <= edges["translator.cli.command"]  # one lazy
    assert "translator.core.translator" in edges["translator.api"]
    assert "translator.core.jsonl" in edges["translator.core.translator"]  # `from translator.core import jsonl as E`
    assert "translator.model" in edges["translator.encoders.enriched"]
    assert "translator.encoders.provider_errors" in edges["translator.encoders.claude_code.frames"]


def test_no_import_cycles() -> None:
    assert cycle(graph()) is None


def test_no_import_cycles_for_the_type_checker_either() -> None:
    assert cycle(graph(typing=True)) is None


def test_a_cycle_is_found() -> None:
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_only_the_cli_imports_the_shells() -> None:
    outside = {
        name: sorted(dep for dep in deps if is_shell(dep))
        for name, deps in graph().items()
        if not is_cli(name) and not is_shell(name)
    }
    assert {name: deps for name, deps in outside.items() if deps} == {}


def test_nothing_imports_the_cli() -> None:
    importers = sorted(name for name, deps in graph().items() if not is_cli(name) and any(map(is_cli, deps)))
    assert importers == ["translator.__main__"]


def test_encoders_import_only_the_model() -> None:
    assert beyond_the_model(graph()) == {}


def test_an_encoder_importing_more_is_found() -> None:
    edges = {
        "translator.encoders.x": {"translator.model", "translator.encoders", "translator.core.jsonl"},
        "translator.encoders.y.z": {"translator.encoders.x", "translator.core.headless_result"},
        "translator.core.translator": {"translator.core.jsonl", "translator.encoders"},
    }
    assert beyond_the_model(edges) == {
        "translator.encoders.x": ["translator.core.jsonl"],
        "translator.encoders.y.z": ["translator.core.headless_result"],
    }


TOP_LEVEL = {  # what is shared by every package (the loose rooms have homes: core, cli, encoders)
    "translator", "translator.__main__", "translator.api", "translator.model", "translator.diagnostics",
    "translator.stdio", "translator.extras", "translator.object_store", "translator.exits", "translator.version",
    "translator.scrape_server",
}


def test_modules_live_in_their_homes() -> None:
    """The reading of bytes (lines, compressed input, the feed) is the core's; the parser and
    the report's command the CLI's; the encoder factory the encoders'. Nothing else sits at
    the top."""
    modules = set(graph())
    assert {"translator.core.lines", "translator.core.compressed", "translator.core.feed",
            "translator.cli.arguments", "translator.cli.report", "translator.encoders.formats"} <= modules
    assert {module_name(path) for path in ROOT.glob("*.py")} == TOP_LEVEL
    assert "translator.cli.report" not in graph()["translator.table.report"]


WATCHERS = ("translator.telemetry", "translator.transcripts", "translator.table")


def reach_into_the_core(edges: dict[str, set[str]]) -> dict[str, list[str]]:
    """What the watchers (telemetry, session files, the table, the metrics) import of the core;
    they see the runs through the watch (translator.encoders.observed) alone. The metrics read
    the core's counters (lines, frames: a stream's `Translator`, a type only) and the names of
    its recoveries (core.states), never its runs."""
    allowed = {"translator.shell.metrics": {"translator.core.states", "translator.core.translator"}}
    found = {
        name: sorted(dep for dep in deps
                     if dep.startswith("translator.core") and dep not in allowed.get(name, set()))
        for name, deps in edges.items()
        if name.startswith(WATCHERS) or name in allowed
    }
    return {name: deps for name, deps in found.items() if deps}


def test_the_watchers_reach_the_core_only_through_the_watch() -> None:
    edges = graph(typing=True)
    assert reach_into_the_core(edges) == {}
    watched = [name for name, deps in edges.items() if "translator.encoders.observed" in deps]
    for watcher in ("translator.telemetry.deferred", "translator.transcripts.files", "translator.table.rows",
                    "translator.shell.metrics"):
        assert watcher in watched


def test_a_watcher_reaching_into_the_core_is_found() -> None:
    edges = {"translator.table.rows": {"translator.core.runs", "translator.encoders.observed"},
             "translator.shell.metrics": {"translator.core.states", "translator.core.fold"},
             "translator.shell.sink": {"translator.core.feed"}}
    assert reach_into_the_core(edges) == {"translator.table.rows": ["translator.core.runs"],
                                          "translator.shell.metrics": ["translator.core.fold"]}


def exit_status_definitions(source: str) -> list[str]:
    """The `EX_*` names a module's source assigns (an exit status defined there)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                names = target.elts if isinstance(target, ast.Tuple) else [target]
                found += [n.id for n in names if isinstance(n, ast.Name) and n.id.startswith("EX_")]
    return found


def test_exit_statuses_are_defined_in_one_module() -> None:
    defined = {module_name(path): names for path in sorted(ROOT.rglob("*.py"))
               if (names := exit_status_definitions(path.read_text()))}
    assert set(defined.pop("translator.exits")) >= {"EX_OK", "EX_USAGE", "EX_DATAERR", "EX_IOERR"}
    assert defined == {}
    assert exit_status_definitions("EX_A, EX_B = 1, 2\nEX_C = 3\nOTHER = 4\n") == ["EX_A", "EX_B", "EX_C"]


def reach_ins(source: str) -> list[tuple[int, str]]:
    """Each `obj._x` of a module's source where `obj` is not `self`, `cls` or a module it
    imports (a dunder is no private member), as (line, expression); a line that says why,
    after `# reach-in:`, is left out."""
    tree = ast.parse(source)
    modules = {(alias.asname or alias.name).split(".")[0] for node in ast.walk(tree)
               if isinstance(node, ast.Import) for alias in node.names}
    modules |= {alias.asname or alias.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) for alias in node.names}  # modules among them
    lines = source.splitlines()
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in {"self", "cls", *modules}:
            continue
        if "# reach-in: " not in lines[node.lineno - 1]:
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def test_no_object_reaches_into_another_s_private_members() -> None:
    found = {str(path.relative_to(ROOT)): hits for path in sorted(ROOT.rglob("*.py"))
             if (hits := reach_ins(path.read_text()))}
    assert found == {}
    justified = sum(path.read_text().count("# reach-in: ") for path in ROOT.rglob("*.py"))
    assert 0 < justified <= 3


def test_a_reach_in_is_found() -> None:
    source = (
        "import os\nfrom x import mod\n"
        "class A:\n"
        "    def f(self, fold):\n"
        "        self._a, os._exit, mod._b, type(self).__name__\n"
        "        fold._bad(1)\n"
        "        self.fold._frame\n"
        "        fold._ok  # reach-in: a library's own\n"
    )
    assert reach_ins(source) == [(6, "fold._bad"), (7, "self.fold._frame")]


TESTS = Path(__file__).parent


def imported_tests(sources: dict[str, str]) -> dict[str, list[str]]:
    """For each file of the suite that imports test modules (test_*.py among `sources`, by file
    name), which; and the test functions of files pytest does not collect (they would never run)."""
    modules = {file.removesuffix(".py") for file in sources if file.startswith("test_")}
    found: dict[str, list[str]] = {}
    for file, source in sources.items():
        tree = ast.parse(source, file)
        wrong = sorted(runtime_imports(tree, file.removesuffix(".py"), False, set()) & modules)
        if not file.startswith("test_"):
            wrong += [node.name for node in tree.body
                      if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_")]
        if wrong:
            found[file] = wrong
    return found


def test_no_test_module_imports_another() -> None:
    sources = {path.name: path.read_text() for path in sorted(TESTS.rglob("*.py"))}
    assert {"conftest.py", "support_fixtures.py", "support_processes.py", "test_cli.py"} <= set(sources)
    assert imported_tests(sources) == {}


def test_a_test_importing_another_is_found() -> None:
    found = imported_tests({
        "test_a.py": "from test_b import helper\n",
        "test_b.py": "def helper(): ...\ndef test_b(): import test_c\n",
        "test_c.py": "from conftest import ROOT\n",
        "support_x.py": "def test_never_collected(): ...\n",
        "conftest.py": "import test_a, os\n",
    })
    assert found == {"test_a.py": ["test_b"], "test_b.py": ["test_c"], "support_x.py": ["test_never_collected"],
                     "conftest.py": ["test_a"]}


def test_tests_are_grouped_as_the_code_is() -> None:
    """Each folder of tests/ is a package of translator/ (and support/, the helpers); only the
    tests of the whole tree (this file, the README's) sit at the top."""
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    assert "support" in folders and folders - {"support"} <= packages
    assert sorted(p.name for p in TESTS.glob("test_*.py")) == ["test_import_graph.py", "test_readme.py"]
    assert not list((TESTS / "support").glob("test_*.py"))


DESIGN = ROOT.parent / "docs" / "design.md"


def defines(path: Path, dotted: str) -> bool:
    """Whether module `path` defines `dotted` (`name`, or `Class.member`) at its top level or in
    a class body (an assignment, a function, a class)."""
    body: list[ast.stmt] = ast.parse(path.read_text()).body
    for part in dotted.split("."):
        found = None
        for node in body:
            names = [node.name] if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) else []
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
            if part in names:
                found = node
        if found is None:
            return False
        body = found.body if isinstance(found, ast.ClassDef) else []
    return True


def test_docs_design_maps_every_module_and_its_walks_name_what_exists() -> None:
    """docs/design.md's package map has a row for each module, and none for one that is gone;
    each step of its walks names a module and something the module defines."""
    text = DESIGN.read_text()
    walks = text[text.index("## Three walks"):text.index("## The hot path")]
    mapped = set(re.findall(r"^\| `(translator/[\w/]+\.py)` \|", text, re.M))
    modules = {path.relative_to(ROOT.parent).as_posix() for path in ROOT.rglob("*.py")}
    assert sorted(modules - mapped) == [] and sorted(mapped - modules) == []
    named = re.findall(r"`(translator/[\w/]+\.py)` `([\w.]+)`", walks)
    assert len(named) >= 20
    assert [(module, name) for module, name in named if not defines(ROOT.parent / module, name)] == []


def test_a_name_a_module_does_not_define_is_found(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("X = 1\nclass A:\n    y: int = 0\n    def f(self): ...\ndef g(): ...\n")
    assert all(defines(module, n) for n in ("X", "A", "A.f", "A.y", "g"))
    assert not any(defines(module, n) for n in ("Y", "A.g", "g.x", "B.f"))


def test_the_shim_s_permissions_serve_both_backends_and_import_neither() -> None:
    """permissions/ decides for the drive backend and for the relay of `caliban -p` alike, and
    knows no backend: each asks it, it never reaches back."""
    edges = graph(typing=True)
    gate = "translator.shim.permissions.gate"
    assert gate in edges["translator.shim.backends.drive.backend"] and gate in edges["translator.shim.tools.servers"]
    permissions = {name: deps for name, deps in edges.items() if name.startswith("translator.shim.permissions")}
    assert permissions and {dep for deps in permissions.values() for dep in deps
                            if dep.startswith(("translator.shim.backends", "translator.shim.tools",
                                               "translator.shim.session"))} == set()  # fmt: skip


def test_the_shim_s_session_names_no_backend() -> None:
    """The session holds one backend through backends/base.py's protocol: choose.py decides which
    over the protocols too, and only main.py (which builds the session) names the backends; the
    relay's servers and the hooks are the `-p` backend's and the gates'."""
    edges = graph(typing=True)
    session, chooser = edges["translator.shim.session"], edges["translator.shim.choose"]
    backends = {dep for dep in session | chooser if dep.startswith("translator.shim.backends")}
    assert backends == {"translator.shim.backends.base"}
    assert {dep for dep in session | chooser
            if dep.startswith("translator.shim.tools") or dep == "translator.shim.permissions.hooks"} == set()  # fmt: skip
    assert "translator.shim.permissions.policy" not in edges["translator.shim.main"]
    assert {"translator.shim.backends.oneshot.backend", "translator.shim.backends.drive.backend"} <= edges[
        "translator.shim.main"
    ]
    gate = "translator.shim.permissions.gate"  # (serves both: each backend asks it)
    assert all(gate in edges[f"translator.shim.backends.{b}.backend"] for b in ("oneshot", "drive"))
