"""Where the value of an expression of the project's code can come from, read from the AST for
tests/codescan_targets.py (which reads the origins as tables, indexes and requests; its docstring lists the rules)."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from pathlib import Path

from tests.codescan_modules import (
    CallSite,
    Function,
    ModuleIndex,
    Scope,
    Unresolved,
    _at,
    _identifier,
    _requires,
)

TARGET_KEYS = frozenset({"TableName", "IndexName", "StreamName", "StreamARN", "StreamArn", "QueueUrl"})


class Origins(ModuleIndex):
    """Resolves expressions of the reading's code to the expressions their values come from."""

    def __init__(self, source: Callable[[str], tuple[Path, bool] | None], is_project: Callable[[str], bool],
                 modules: Iterable[str], sites: Iterable[tuple[ast.Call, str, str]]) -> None:
        """`sites`: the calls of the reading's code, with their unit's module and qualname (where parameters
        get their values)."""
        super().__init__(source, is_project, modules)
        self._memo: dict[tuple[int, Scope], list[tuple[ast.expr, Scope]]] = {}
        self._active: set[tuple[int, Scope]] = set()
        self._attributes: dict[tuple[str, int, str], list[tuple[ast.expr, Scope]]] = {}
        self._calls: dict[int, list[CallSite]] = {}
        self._sites = [(call, self.scope_of(module, qualname)) for call, module, qualname in sites]

    def origins(self, expr: ast.expr, scope: Scope) -> list[tuple[ast.expr, Scope]]:
        """The expressions (with their scopes) `expr`'s value can come from: literals, dicts, lists, calls
        outside the project, ..., each to be read by `values`, `shapes` or `elements`."""
        key = (id(expr), scope)
        if key in self._memo:
            return self._memo[key]
        if key in self._active:  # a cycle: what it adds is found along the other way in
            return []
        self._active.add(key)
        try:
            found = self._origins(expr, scope)
        finally:
            self._active.discard(key)
        self._memo[key] = found
        return found

    def _origins(self, expr: ast.expr, scope: Scope) -> list[tuple[ast.expr, Scope]]:
        if isinstance(expr, ast.Name):
            return self._name(expr.id, scope, expr)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            if expr.value.id == "self" and scope.cls is not None:
                return self._self_attribute(scope.module, scope.cls, expr.attr, expr)
            imported = self._imported_module(expr.value.id, scope)
            if imported is not None:
                return self._module_name(expr.attr, imported, expr)
            raise Unresolved(_at(scope, expr))
        if isinstance(expr, ast.IfExp):
            return self.origins(expr.body, scope) + self.origins(expr.orelse, scope)
        if isinstance(expr, ast.BoolOp):
            return [found for value in expr.values for found in self.origins(value, scope)]
        if isinstance(expr, ast.NamedExpr):
            return self.origins(expr.value, scope)
        if isinstance(expr, ast.Call) and not _requires(expr):
            returned = self._returns(expr, scope)
            if returned is not None:
                return returned
        return [(expr, scope)]

    def _name(self, name: str, scope: Scope, node: ast.AST) -> list[tuple[ast.expr, Scope]]:
        function = scope.function
        if function is not None:
            found: list[tuple[ast.expr, Scope]] = []
            bound = False
            arguments = function.args
            if name in {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]} or (
                    arguments.kwarg is not None and arguments.kwarg.arg == name):
                bound = True
                found += self._parameter(function, scope, name)
            if arguments.vararg is not None and arguments.vararg.arg == name:
                raise Unresolved(f"{_at(scope, node)} (a *args parameter)")
            mapped = {id(inner.args[0]) for inner in ast.walk(function) if isinstance(inner, ast.Call)
                      and _identifier(inner.func) == "map" and inner.args and isinstance(inner.args[0], ast.Lambda)}
            for inner in ast.walk(function):
                if id(inner) not in mapped:
                    bound |= self._bindings(inner, name, scope, found)
            if bound:
                return found
        return self._module_name(name, scope.module, node)

    def _bindings(self, inner: ast.AST, name: str, scope: Scope, found: list[tuple[ast.expr, Scope]]) -> bool:
        """Adds to `found` what `inner` (a node of the scope's function) binds `name` to; whether it binds it."""
        if isinstance(inner, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in inner.targets):
                found += self.origins(inner.value, scope)
                return True
            for target in inner.targets:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                        and target.value.id == name:
                    if not isinstance(target.slice, ast.Constant) or target.slice.value in TARGET_KEYS:
                        raise Unresolved(f"{_at(scope, inner)} (a request's target set by item)")
                elif any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target)):
                    raise Unresolved(f"{_at(scope, inner)} (unpacked into {name})")
        elif isinstance(inner, (ast.AnnAssign, ast.NamedExpr)) and isinstance(inner.target, ast.Name) \
                and inner.target.id == name and inner.value is not None:
            found += self.origins(inner.value, scope)
            return True
        elif isinstance(inner, (ast.For, ast.AsyncFor, ast.comprehension)):
            if isinstance(inner.target, ast.Name) and inner.target.id == name:
                found += self.elements(inner.iter, scope)
                return True
            if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(inner.target)):
                raise Unresolved(f"{scope.module}: {ast.unparse(inner.target)} (unpacked into {name})")
        elif isinstance(inner, ast.Call) and inner.args and isinstance(inner.args[0], ast.Lambda):
            lambda_ = inner.args[0]
            if name in {a.arg for a in lambda_.args.args}:
                if _identifier(inner.func) != "map" or len(inner.args) < 2:
                    raise Unresolved(f"{_at(scope, inner)} (the lambda's {name})")
                found += self.elements(inner.args[1], scope)
                return True
        elif isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and inner is not scope.function:
            arguments = inner.args
            if name in {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}:
                raise Unresolved(f"{scope.module}:{inner.lineno}: the nested function's parameter {name}")
        elif isinstance(inner, ast.ImportFrom) and any((a.asname or a.name) == name for a in inner.names):
            index = self.index(scope.module)
            assert index is not None
            module, attribute = self._imported(inner, scope.module, index.is_package)[name]
            found += self._module_name(attribute or name, module, inner)
            return True
        return False

    def _module_name(self, name: str, module: str, node: ast.AST) -> list[tuple[ast.expr, Scope]]:
        index = self.index(module)
        if index is None:
            raise Unresolved(f"{module}: {name} (outside the project)")
        if name in index.bindings:
            return [found for value in index.bindings[name] for found in self.origins(value, Scope(module))]
        if name in index.imports:
            source, attribute = index.imports[name]
            if attribute is not None and self.index(source) is not None:
                return self._module_name(attribute, source, node)
        raise Unresolved(f"{module}:{getattr(node, 'lineno', '?')}: {name} (no constant of the module)")

    def _returns(self, call: ast.Call, scope: Scope) -> list[tuple[ast.expr, Scope]] | None:
        """What a call of a project function returns; None when the callee is no project function."""
        callee: tuple[str, str] | None = None
        index = self.index(scope.module)
        if isinstance(call.func, ast.Name) and index is not None:
            if call.func.id in index.functions:
                callee = (scope.module, call.func.id)
            elif call.func.id in index.imports:
                module, attribute = index.imports[call.func.id]
                if attribute is not None:
                    callee = (module, attribute)
        elif isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name):
            module_name = self._imported_module(call.func.value.id, scope)
            if module_name is not None:
                callee = (module_name, call.func.attr)
        if callee is None:
            return None
        target = self.index(callee[0])
        if target is None or callee[1] not in target.functions:
            return None
        function, _ = target.functions[callee[1]]
        inner = Scope(callee[0], function)
        return [found for node in self._own_nodes(function) if isinstance(node, ast.Return) and node.value
                for found in self.origins(node.value, inner)]

    def _method_returns(self, name: str) -> list[tuple[ast.expr, Scope]] | None:
        """What `x.name(...)` returns, by the method's name among the classes of the modules in reach (as
        tests/codescan.py resolves methods; read only where a request's dict is expected, so a library's
        `.get` is no project method's); None when no class has one."""
        methods = [(module, *index.functions[qualname]) for module, index in list(self._indexes.items())
                   if index is not None for qualname in index.functions
                   if "." in qualname and qualname.rpartition(".")[2] == name]
        if not methods:
            return None
        return [found for module, function, cls in methods for node in self._own_nodes(function)
                if isinstance(node, ast.Return) and node.value
                for found in self.origins(node.value, Scope(module, function, cls))]

    def _parameter(self, function: Function, scope: Scope, name: str) -> list[tuple[ast.expr, Scope]]:
        arguments = function.args
        positional = [a.arg for a in [*arguments.posonlyargs, *arguments.args]]
        is_method = scope.cls is not None and not any(_identifier(d) == "staticmethod"
                                                      for d in function.decorator_list)
        if is_method:
            if positional and positional[0] == name:
                raise Unresolved(f"{scope.module}:{function.lineno}: {name} (the instance)")
            positional = positional[1:]
        defaults = dict(zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults,
                            strict=True)) if arguments.defaults else {}
        defaults |= {a.arg: d for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True) if d}
        sites = self._call_sites(function, scope)
        if not sites and function.name == "__init__":
            return []  # no instance is built in reach, so no method of one runs
        if not sites:
            raise Unresolved(f"{scope.module}:{function.lineno}: {function.name}({name}) is called nowhere in reach")
        if arguments.kwarg is not None and arguments.kwarg.arg == name:
            named = set(positional) | {a.arg for a in arguments.kwonlyargs}
            return [(ast.Dict(keys=[None if k.arg is None else ast.Constant(k.arg) for k in site.keywords
                                    if k.arg not in named],
                              values=[k.value for k in site.keywords if k.arg not in named]), site.scope)
                    for site in sites]
        found: list[tuple[ast.expr, Scope]] = []
        for site in sites:
            found += self._argument(site, positional, name, defaults, scope)
        return found

    def _argument(self, site: CallSite, positional: list[str], name: str, defaults: dict[str, ast.expr],
                  scope: Scope) -> list[tuple[ast.expr, Scope]]:
        for keyword in site.keywords:
            if keyword.arg == name:
                return self.origins(keyword.value, site.scope)
        if name in positional:
            position = positional.index(name)
            for number, argument in enumerate(site.args):
                if isinstance(argument, ast.Starred):
                    raise Unresolved(f"{_at(site.scope, argument)} (a *spread that may pass {name})")
                if number == position:
                    return self.origins(argument, site.scope)
        if any(keyword.arg is None for keyword in site.keywords):
            raise Unresolved(f"{site.scope.module}: a **spread that may pass {name}")
        if name in defaults:
            return self.origins(defaults[name], Scope(scope.module))
        return []  # the call would fail: it passes no value

    def _call_sites(self, function: Function, scope: Scope) -> list[CallSite]:
        if id(function) not in self._calls:
            self._calls[id(function)] = self._find_call_sites(function, scope)
        return self._calls[id(function)]

    def _find_call_sites(self, function: Function, scope: Scope) -> list[CallSite]:
        sites: list[CallSite] = []
        if scope.cls is not None and function.name == "__init__":
            classes = [(scope.module, scope.cls), *self._subclasses(scope.module, scope.cls)]
            for call, where in self._sites:
                if any(self._refers_to(call.func, where, module, cls.name) for module, cls in classes) or (
                        isinstance(call.func, ast.Attribute) and call.func.attr == "__init__"
                        and isinstance(call.func.value, ast.Call) and _identifier(call.func.value.func) == "super"
                        and where.cls is not None and (where.module, where.cls) in classes) or (
                        isinstance(call.func, ast.Name) and call.func.id == "cls" and where.cls is scope.cls):
                    sites.append(CallSite(list(call.args), list(call.keywords), where))
            return sites
        for call, where in self._sites:
            func = call.func
            if scope.cls is not None:
                if isinstance(func, ast.Attribute) and func.attr == function.name:
                    sites.append(CallSite(list(call.args), list(call.keywords), where))
                continue
            if self._refers_to(func, where, scope.module, function.name):
                sites.append(CallSite(list(call.args), list(call.keywords), where))
            elif (_identifier(func) == "partial" and call.args
                  and self._refers_to(call.args[0], where, scope.module, function.name)):
                sites.append(CallSite(list(call.args[1:]), list(call.keywords), where))
        return sites

    def _self_attribute(self, module: str, cls: ast.ClassDef, attribute: str,
                        node: ast.AST) -> list[tuple[ast.expr, Scope]]:
        key = (module, id(cls), attribute)
        if key not in self._attributes:
            self._attributes[key] = self._assigned(module, cls, attribute, node)
        return self._attributes[key]

    def _assigned(self, module: str, cls: ast.ClassDef, attribute: str,
                  node: ast.AST) -> list[tuple[ast.expr, Scope]]:
        found: list[tuple[ast.expr, Scope]] = []
        bound = False
        for where, current in self._related_classes(module, cls):
            fields = self._fields(current)
            for member in current.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    method = Scope(where, member, current)
                    if member.name == attribute and any(_identifier(d) in {"property", "cached_property"}
                                                        for d in member.decorator_list):
                        bound = True
                        found += [f for n in self._own_nodes(member) if isinstance(n, ast.Return) and n.value
                                  for f in self.origins(n.value, method)]
                    for inner in ast.walk(member):
                        targets = inner.targets if isinstance(inner, ast.Assign) else (
                            [inner.target] if isinstance(inner, ast.AnnAssign) and inner.value else [])
                        if any(isinstance(t, ast.Attribute) and t.attr == attribute and isinstance(t.value, ast.Name)
                               and t.value.id == "self" for t in targets):
                            bound = True
                            found += self.origins(inner.value, method)  # type: ignore[union-attr, arg-type]
                elif isinstance(member, ast.AnnAssign) and isinstance(member.target, ast.Name) \
                        and member.target.id == attribute:
                    bound = True
                    if member.value is not None:
                        found += self.origins(member.value, Scope(where))
                    elif fields is not None:
                        found += self._field(where, current, fields, attribute, member.value)
                elif isinstance(member, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attribute
                                                            for t in member.targets):
                    bound = True
                    found += self.origins(member.value, Scope(where))
        if not bound:
            raise Unresolved(f"{module}:{getattr(node, 'lineno', '?')}: self.{attribute} is never assigned")
        return found

    def _field(self, module: str, cls: ast.ClassDef, fields: list[str], name: str,
               default: ast.expr | None) -> list[tuple[ast.expr, Scope]]:
        found: list[tuple[ast.expr, Scope]] = []
        sites = [CallSite(list(call.args), list(call.keywords), where) for call, where in self._sites
                 if self._refers_to(call.func, where, module, cls.name)]
        for site in sites:  # none: no instance is built in reach, so no method of one runs
            found += self._argument(site, fields, name, {}, Scope(module))
        return found

    def elements(self, expr: ast.expr, scope: Scope) -> list[tuple[ast.expr, Scope]]:
        """Where the elements of an iterable come from (a list, tuple or set display, a comprehension)."""
        found: list[tuple[ast.expr, Scope]] = []
        for origin, where in self.origins(expr, scope):
            if isinstance(origin, (ast.List, ast.Tuple, ast.Set)):
                for element in origin.elts:
                    found += (self.elements(element.value, where) if isinstance(element, ast.Starred)
                              else self.origins(element, where))
            elif isinstance(origin, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
                found += self.origins(origin.elt, where)
            else:
                raise Unresolved(f"{_at(where, origin)} (the elements of an iterable)")
        return found
