"""A module's units of code for tests/codescan.py, and the names each unit uses: its top-level code, its
functions and its methods (`_split`), and the identifiers they name, by how they name them (`_names`)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field

_ATTRIBUTE_FUNCTIONS = {"getattr", "hasattr", "setattr", "delattr"}

@dataclass(eq=False)
class _Unit:
    """Code that runs together: a module's top-level code, a function, or a method."""

    module: str
    is_package: bool
    qualname: str  # "" for the module's top-level code
    nodes: list[ast.AST]
    decorators: list[str] = field(default_factory=list)  # the last identifier of each decorator


@dataclass(eq=False)
class _Class:
    module: str
    name: str
    bases: list[str]  # the last identifier of each base (Generic[T] -> Generic)
    methods: list[tuple[str, _Unit]] = field(default_factory=list)


@dataclass
class _Module:
    code: _Unit  # top-level code
    module_names: frozenset[str] = frozenset()  # names its top level binds to project modules
    functions: list[tuple[str, _Unit]] = field(default_factory=list)
    classes: list[_Class] = field(default_factory=list)


def _is_type_checking(node: ast.If) -> bool:
    return ((isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
            or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING"))


def _is_main_guard(node: ast.AST) -> bool:
    """`if __name__ == "__main__":` (runs only when the module is run as a script, never on import)."""
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and isinstance(node.test.left, ast.Name)
            and node.test.left.id == "__name__" and len(node.test.comparators) == 1
            and _literal(node.test.comparators[0]) == "__main__")


def _identifier(node: ast.AST) -> str | None:
    """The last identifier of `a.b.c`, `a.b(...)`, `a[b]`."""
    while isinstance(node, (ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _walk(roots: Iterable[ast.AST]) -> list[ast.AST]:
    """Every node under `roots` (roots included) but those under `if TYPE_CHECKING:`."""
    found: list[ast.AST] = []
    todo = list(roots)
    while todo:
        node = todo.pop()
        found.append(node)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                todo.extend(child.orelse)
            else:
                todo.append(child)
    return found


def _dependencies(args: ast.arguments) -> list[ast.AST]:
    """The `Depends(f)` of a function's parameter annotations (`Annotated[T, Depends(f)]`): the library calls
    `f` each time it calls the function, so they are read as the function's code."""
    annotations = [arg.annotation for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs] if arg.annotation]
    return [node for annotation in annotations for node in ast.walk(annotation)
            if isinstance(node, ast.Call) and _identifier(node.func) == "Depends"]


def _split(name: str, is_package: bool, tree: ast.Module) -> _Module:
    """A module's units: its top-level code, its top-level functions, its classes' methods."""
    top: list[ast.AST] = []
    module = _Module(_Unit(name, is_package, "", top))

    def function(node: ast.FunctionDef | ast.AsyncFunctionDef, qualname: str) -> _Unit:
        args = node.args
        top.extend(_walk([*node.decorator_list, *args.defaults, *(d for d in args.kw_defaults if d)]))
        body = _walk([*node.body, *_dependencies(args)])
        return _Unit(name, is_package, qualname, body,
                     [d for decorator in node.decorator_list if (d := _identifier(decorator))])

    def visit(node: ast.AST, owner: _Class | None) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child, owner)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            qualname = f"{owner.name}.{node.name}" if owner else node.name
            unit = function(node, qualname)
            (owner.methods if owner else module.functions).append((node.name, unit))
        elif isinstance(node, ast.ClassDef):
            top.extend(_walk([*node.bases, *node.keywords, *node.decorator_list]))
            cls = _Class(name, node.name, [b for base in node.bases if (b := _identifier(base))])
            module.classes.append(cls)
            for child in node.body:
                visit(child, cls)
        else:
            top.append(node)
            for child in ast.iter_child_nodes(node):
                visit(child, owner)

    for statement in tree.body:
        if not _is_main_guard(statement):
            visit(statement, None)
    return module


@dataclass
class _Names:
    """The identifiers a unit's code uses, by how (see `_names`)."""

    plain: set[str] = field(default_factory=set)
    attributes: set[str] = field(default_factory=set)
    stored: set[str] = field(default_factory=set)
    valued: set[str] = field(default_factory=set)
    computed: bool = False


def _names(nodes: Iterable[ast.AST], modules: frozenset[str] = frozenset()) -> _Names:
    """The plain names the nodes use (`f`, and `m.f` where `m` is one of `modules`, names of project modules:
    a module's function, never a method), the attribute names (`x.f`, `getattr(x, "f")`), the attributes
    assigned (`x.f = ...`: only a property's setter runs), the attributes used as values (`x.f.get(...)`,
    `x.f[k]`: a method object has neither, so only a decorated method, a property or a descriptor, can be one),
    and whether they access an attribute by a computed name."""
    nodes = list(nodes)
    local = {n.arg for n in nodes if isinstance(n, ast.arg)} | {
        n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    as_values = {id(n.value) for n in nodes if isinstance(n, ast.Subscript) or (
        isinstance(n, ast.Attribute) and not _is_dunder(n.attr))}
    found = _Names()
    plain, names, stored, valued = found.plain, found.attributes, found.stored, found.valued
    for node in nodes:
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):  # `x = ...` calls nothing
            plain.add(node.id)
        elif isinstance(node, ast.ImportFrom):  # `from m import f as g`: g() calls f
            plain.update(alias.name for alias in node.names if alias.asname is not None)
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
              and node.value.id not in local):
            plain.add(node.attr)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            stored.add(node.attr)
        elif isinstance(node, ast.Attribute) and id(node) in as_values:
            valued.add(node.attr)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in _ATTRIBUTE_FUNCTIONS and len(node.args) >= 2):
            literal = _literal(node.args[1])
            if literal is None:
                found.computed = True
            else:
                names.add(literal)
    return found


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
