"""A project's own static import graph (pure: a reader of file bytes comes in, so it works on any commit).

:func:`import_closure` follows ``import`` statements from entry files through the project's packages.
Imports under ``if TYPE_CHECKING:`` never run and are not followed. With ``lazy=False`` only imports at
module level are followed: those load whenever the module does, so the closure is a lower bound of what
a process that loaded the entry files loaded (the guard at ingest). With ``lazy=True`` imports inside
functions are followed too: an upper estimate of what running the entry files may load (the inputs of a
test file). Imports by name (``importlib.import_module``) are not seen; a cell names the modules it
reaches that way as entry files.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass

Reader = Callable[[str], bytes | None]  # project path -> bytes, None when there is no such file


@dataclass(frozen=True)
class Closure:
    """Project files reached (POSIX paths) and the top-level names of the other modules imported."""

    files: frozenset[str]
    external: frozenset[str]


#: The import package that holds this repository's rooms as subpackages: ``soakbench.harness.x`` is the
#: file ``harness/x.py``. A project without ``soakbench/__init__.py`` imports its folders by their own names.
NAMESPACE = "soakbench"
_NAMESPACE_INIT = f"{NAMESPACE}/__init__.py"


def module_path(module: str, read: Reader) -> str | None:
    """The project file of dotted ``module`` (``a/b.py`` or ``a/b/__init__.py``), None when not in it."""
    if read(_NAMESPACE_INIT) is not None and (module == NAMESPACE or module.startswith(f"{NAMESPACE}.")):
        if module == NAMESPACE:
            return _NAMESPACE_INIT
        module = module.removeprefix(f"{NAMESPACE}.")
    base = module.replace(".", "/")
    for candidate in (f"{base}.py", f"{base}/__init__.py"):
        if read(candidate) is not None:
            return candidate
    return None


def _package_of(path: str) -> list[str]:
    """The dotted package parts a file's relative imports start from (its folder)."""
    return path.removesuffix(".py").split("/")[:-1]


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _inner_blocks(node: ast.stmt, lazy: bool) -> list[list[ast.stmt]]:
    """The statement blocks inside ``node`` whose imports run when the module (lazy: any code) runs."""
    if isinstance(node, ast.If) and _is_type_checking(node):
        return [node.orelse]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return [node.body] if lazy else []
    if isinstance(node, ast.Try):
        return [node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)]
    blocks = [getattr(node, name, None) for name in ("body", "orelse")]
    return [b for b in blocks if isinstance(b, list)]


def _imports(tree: ast.Module, lazy: bool) -> list[tuple[str, tuple[str, ...], int]]:
    """(module, imported names, relative level) of every import that runs."""
    out: list[tuple[str, tuple[str, ...], int]] = []
    todo: list[list[ast.stmt]] = [tree.body]
    while todo:
        for node in todo.pop():
            if isinstance(node, ast.Import):
                out.extend((alias.name, (), 0) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                out.append((node.module or "", tuple(a.name for a in node.names), node.level))
            else:
                todo.extend(_inner_blocks(node, lazy))
    return out


def _targets(
    path: str, entry: tuple[str, tuple[str, ...], int], read: Reader
) -> tuple[list[str], str | None]:
    """Project files one import loads (its packages' ``__init__`` files too), or the external top name."""
    module, names, level = entry
    if level:
        package = _package_of(path)
        package = package[: len(package) - (level - 1)] if level > 1 else package
        module = ".".join([*package, module] if module else package)
    parts = module.split(".")
    chain = [module_path(".".join(parts[:i]), read) for i in range(1, len(parts) + 1)]
    files = [p for p in chain if p is not None]  # a namespace package has no file of its own
    for name in names:  # ``from pkg import submodule`` loads the submodule
        sub = module_path(f"{module}.{name}", read)
        if sub is not None:
            files.append(sub)
    return (files, None) if files else ([], parts[0] or None)


def import_closure(entries: Iterable[str], read: Reader, *, lazy: bool) -> Closure:
    """Every project file reached from the ``entries`` (project paths of ``.py`` files) by imports."""
    seen: set[str] = set()
    external: set[str] = set()
    todo = [e for e in entries if read(e) is not None]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        source = read(path)
        try:
            tree = ast.parse(source or b"", filename=path)
        except SyntaxError:
            continue  # a file that does not parse cannot have been loaded either
        for entry in _imports(tree, lazy):
            files, top = _targets(path, entry, read)
            todo += [f for f in files if f not in seen]
            if top:
                external.add(top)
    return Closure(frozenset(seen), frozenset(external))
