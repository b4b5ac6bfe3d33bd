"""The project's modules as tests/codescan_targets.py reads them: each one's functions, classes, constants and
imports (`_Index`), the scope an expression is read in (`Scope`), and which class or function a name, read
somewhere, refers to."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

Function = ast.FunctionDef | ast.AsyncFunctionDef
_FIELD_FREE_BASES = frozenset({"NamedTuple"})


class Unresolved(ValueError):
    """An expression whose values the reading cannot follow (the place and the expression in the message)."""


@dataclass(frozen=True)
class Scope:
    """Where an expression is evaluated: a module's top level, or a function (a method: with its class)."""

    module: str
    function: Function | None = None
    cls: ast.ClassDef | None = None


@dataclass
class _Index:
    name: str
    is_package: bool
    tree: ast.Module
    functions: dict[str, tuple[Function, ast.ClassDef | None]] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    bindings: dict[str, list[ast.expr]] = field(default_factory=dict)  # module-level `NAME = value`
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # name -> (module, its attribute)


@dataclass(frozen=True)
class CallSite:
    args: list[ast.expr]
    keywords: list[ast.keyword]
    scope: Scope


def _identifier(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _top_level(statements: Iterable[ast.stmt]) -> Iterable[ast.stmt]:
    """Statements run at a module's or a class's top level (into if/try blocks, not into defs)."""
    for statement in statements:
        yield statement
        if isinstance(statement, (ast.If, ast.Try)):
            yield from _top_level([*statement.body, *statement.orelse,
                                   *getattr(statement, "finalbody", []),
                                   *(s for h in getattr(statement, "handlers", []) for s in h.body)])


def _at(scope: Scope, node: ast.AST) -> str:
    return f"{scope.module}:{getattr(node, 'lineno', '?')}: {ast.unparse(node)}"


def _literal_argument(call: ast.Call) -> str | None:
    first = call.args[0] if len(call.args) == 1 else None
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def _requires(call: ast.Call) -> bool:
    """`<settings>.require("jobs_table")`: the resource the settings name."""
    return _identifier(call.func) == "require" and _literal_argument(call) is not None


class ModuleIndex:
    """The modules of the project, parsed once each."""

    def __init__(self, source: Callable[[str], tuple[Path, bool] | None], is_project: Callable[[str], bool],
                 modules: Iterable[str]) -> None:
        """`source`: a module's file and whether it is a package; `modules`: those the reading loaded (where
        subclasses are looked for)."""
        self._source = source
        self._is_project = is_project
        self._indexes: dict[str, _Index | None] = {}
        self._imports: dict[Scope, dict[str, tuple[str, str | None]]] = {}
        for module in modules:
            self.index(module)

    def index(self, module: str) -> _Index | None:
        if module not in self._indexes:
            found = self._source(module) if self._is_project(module) else None
            self._indexes[module] = None if found is None else self._build(module, *found)
        return self._indexes[module]

    def _build(self, module: str, path: Path, is_package: bool) -> _Index:
        index = _Index(module, is_package, ast.parse(path.read_text(), str(path)))
        for statement in _top_level(index.tree.body):
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                index.functions[statement.name] = (statement, None)
            elif isinstance(statement, ast.ClassDef):
                index.classes[statement.name] = statement
                for member in statement.body:
                    if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        index.functions[f"{statement.name}.{member.name}"] = (member, statement)
            elif isinstance(statement, ast.Assign):
                for target in statement.targets:
                    if isinstance(target, ast.Name):
                        index.bindings.setdefault(target.id, []).append(statement.value)
            elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.value:
                index.bindings.setdefault(statement.target.id, []).append(statement.value)
            elif isinstance(statement, (ast.Import, ast.ImportFrom)):
                index.imports.update(self._imported(statement, module, is_package))
        return index

    @staticmethod
    def _imported(node: ast.Import | ast.ImportFrom, module: str,
                  is_package: bool) -> dict[str, tuple[str, str | None]]:
        if isinstance(node, ast.Import):
            return {alias.asname or alias.name.partition(".")[0]:
                    (alias.name if alias.asname else alias.name.partition(".")[0], None) for alias in node.names}
        source = node.module or ""
        if node.level:
            parts = (module if is_package else module.rpartition(".")[0]).split(".")
            base = ".".join(parts[: len(parts) - node.level + 1])
            source = f"{base}.{node.module}" if node.module else base
        return {alias.asname or alias.name: (source, alias.name) for alias in node.names}

    def scope_of(self, module: str, qualname: str) -> Scope:
        """The scope of a codescan unit ("" for a module's top-level code)."""
        index = self.index(module)
        if not qualname or index is None:
            return Scope(module)
        function, cls = index.functions[qualname]
        return Scope(module, function, cls)

    def _imported_module(self, name: str, scope: Scope) -> str | None:
        index = self.index(scope.module)
        imported = index.imports.get(name) if index else None
        if imported is None:
            return None
        module, attribute = imported
        candidate = module if attribute is None else f"{module}.{attribute}"
        return candidate if self.index(candidate) is not None else None

    def _refers_to(self, node: ast.expr, where: Scope, module: str, name: str) -> bool:
        """Whether `node` (`f`, `m.f`), read in `where`, is `module`'s top-level function or class `name`: by its
        own name in its module, or imported (at the top, or in the function `where` is)."""
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return node.attr == name and self._imported_module(node.value.id, where) == module
        if not isinstance(node, ast.Name):
            return False
        imports = self._scope_imports(where)
        if node.id in imports:
            return imports[node.id] == (module, name)
        return where.module == module and node.id == name

    def _scope_imports(self, scope: Scope) -> dict[str, tuple[str, str | None]]:
        """The names imported where `scope` runs: its module's top level, and its function's own imports."""
        if scope not in self._imports:
            index = self.index(scope.module)
            imports = dict(index.imports) if index else {}
            if scope.function is not None and index is not None:
                for inner in ast.walk(scope.function):
                    if isinstance(inner, ast.ImportFrom):
                        imports.update(self._imported(inner, scope.module, index.is_package))
            self._imports[scope] = imports
        return self._imports[scope]

    def _related_classes(self, module: str, cls: ast.ClassDef) -> list[tuple[str, ast.ClassDef]]:
        related = [(module, cls), *self._subclasses(module, cls)]
        todo = [(module, cls)]
        while todo:
            where, current = todo.pop()
            for base in current.bases:
                found = self._class_named(_identifier(base), where)
                if found is not None and found not in related:
                    related.append(found)
                    todo.append(found)
        return related

    def _class_named(self, name: str | None, module: str) -> tuple[str, ast.ClassDef] | None:
        index = self.index(module)
        if name is None or index is None:
            return None
        if name in index.classes:
            return module, index.classes[name]
        source, attribute = index.imports.get(name, ("", None))
        target = self.index(source) if attribute is not None else None
        return (source, target.classes[attribute]) if target and attribute in target.classes else None

    def _subclasses(self, module: str, cls: ast.ClassDef) -> list[tuple[str, ast.ClassDef]]:
        return [(name, other) for name, index in list(self._indexes.items()) if index is not None
                for other in index.classes.values()
                if any(_identifier(base) == cls.name for base in other.bases)
                and self._class_named(cls.name, name) == (module, cls)]

    @staticmethod
    def _own_nodes(function: Function) -> Iterable[ast.AST]:
        todo: list[ast.AST] = list(function.body)
        while todo:
            node = todo.pop()
            yield node
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                todo.extend(ast.iter_child_nodes(node))

    @staticmethod
    def _fields(owner: ast.ClassDef) -> list[str] | None:
        """A dataclass's or NamedTuple's fields, in the constructor's order; None for another class."""
        if not (any(_identifier(d.func if isinstance(d, ast.Call) else d) == "dataclass"
                    for d in owner.decorator_list)
                or any(_identifier(base) in _FIELD_FREE_BASES for base in owner.bases)):
            return None
        return [m.target.id for m in owner.body if isinstance(m, ast.AnnAssign) and isinstance(m.target, ast.Name)
                and "ClassVar" not in ast.unparse(m.annotation)]
