"""The package's import graph has no cycles (issue 28, point 9): no kolo module
imports another inside a function (the way a cycle used to be closed), the graph
of top-level imports between kolo's modules is acyclic, and every module imports
first in a fresh interpreter (a cycle closed at top level fails there)."""

import ast
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.normpath(os.path.join(HERE, "..", "..", "bindings", "python"))


def modules():
    """{module name: path} for every .py file of the kolo package."""
    out = {}
    for folder, _, files in os.walk(os.path.join(PACKAGE_ROOT, "kolo")):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, f), PACKAGE_ROOT)[:-3]
                name = rel.replace(os.sep, ".")
                out[name[:-len(".__init__")] if name.endswith(".__init__") else name] = \
                    os.path.join(folder, f)
    return out


def kolo_targets(node, module, is_package):
    """The kolo modules an Import/ImportFrom node names (empty for other packages)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name == "kolo" or a.name.startswith("kolo.")]
    if node.level == 0:
        base = node.module or ""
        if not (base == "kolo" or base.startswith("kolo.")):
            return []
    else:
        parts = module.split(".")
        anchor = parts if is_package else parts[:-1]
        anchor = anchor[:len(anchor) - (node.level - 1)]
        base = ".".join(anchor + ([node.module] if node.module else []))
    known = modules()
    # `from . import _core` names a module; `from ._core import check` names _core.
    return [base + "." + a.name if base + "." + a.name in known else base for a in node.names]


def imports(module, path):
    """(top-level kolo imports, kolo imports inside functions) of one module."""
    tree = ast.parse(open(path).read(), path)
    is_package = path.endswith("__init__.py")
    top, nested = set(), []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    names = kolo_targets(inner, module, is_package)
                    if names:
                        nested.append((inner.lineno, names))
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            top.update(kolo_targets(node, module, is_package))
    return top, nested


def test_no_kolo_import_inside_a_function():
    found = []
    for module, path in sorted(modules().items()):
        found += ["%s:%d imports %s" % (module, line, names)
                  for line, names in imports(module, path)[1]]
    assert not found, "imports inside functions: %s" % found


def test_the_import_graph_between_modules_is_acyclic():
    mods = modules()
    # Every import is an edge, those inside functions too (how a cycle used to be
    # hidden); a submodule's import of its own package (kolo.torch -> kolo) is one
    # as well, since the package's __init__ runs first.
    graph = {}
    for m, p in mods.items():
        top, nested = imports(m, p)
        graph[m] = {t for t in top.union(*[set(names) for _, names in nested]) if t != m}
    state = {}

    def visit(m, stack):
        state[m] = "open"
        for t in sorted(graph.get(m, ())):
            if state.get(t) == "open":
                raise AssertionError("import cycle: %s" % " -> ".join(stack + [m, t]))
            if t not in state:
                visit(t, stack + [m])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


def test_every_module_imports_first_in_a_fresh_interpreter():
    script = (
        "import importlib, sys\n"
        "sys.path.insert(0, %r)\n"
        "import torch, numpy\n"  # keep the heavy imports, drop kolo's between modules
        "bad = []\n"
        "for name in %r:\n"
        "    for m in [m for m in sys.modules if m == 'kolo' or m.startswith('kolo.')]:\n"
        "        del sys.modules[m]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as e:\n"
        "        bad.append('%%s: %%r' %% (name, e))\n"
        "print('\\n'.join(bad))\n"
        "sys.exit(1 if bad else 0)\n" % (PACKAGE_ROOT, sorted(modules())))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "MPI", "HYDRA"))}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
