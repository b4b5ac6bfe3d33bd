"""Static reading of the project's own code, for the template tests: which code an entry point can run,
which AWS SDK operations that code calls, and which environment variables it reads.

Nothing is imported or executed: modules are parsed with `ast`. The reading follows CALL PATHS, not modules:
from the entry points it follows the functions and methods they can call, over a conservative call graph of
the project's modules, so a function is granted what its call paths can do, not everything the modules it
imports can do. The graph may over-approximate (follow a call that never happens) but never under-approximates,
as long as the code follows the conventions the tests rely on:

- AWS clients are made with a literal service name (`settings.client("dynamodb")`, `boto3.client("kinesis")`);
- SDK operations are called as attributes (`self._db.put_item(...)`, `get_paginator("query")`), with
  `IndexName="..."` literals for index queries and `settings.require("<resource>")` for resource names;
- environment variables are read with literal names (`os.environ.get("X")`, `source.get("X")` where
  `source` is `os.environ` or a mapping standing in for it, `helper(source, "X", ...)`,
  `settings.require("jobs_table")` -> JOBS_TABLE);
- the project's code is called by name: a function, class or method runs only where its name is written
  (`store.replay(...)`, `JobStore(...)`, `key=self._order`, `getattr(x, "literal")`, a route's parameter
  annotated `Annotated[T, Depends(f)]`: read as the route's code) or where a library calls it (see below).
  Components come from the wiring class (onward/bootstrap.py's Deployment, whose builders are `@Component`
  methods) by attribute, `deployment.relay`, so a builder (and the imports inside it) is read only where its
  name is.

How names are resolved (each rule errs on the side of reading more):

- units of code: a module's top-level code (class bodies, decorators and default values included, what runs
  at import; not its `if __name__ == "__main__":` block, which runs only as a script: root the function it
  calls), each top-level function, each method; a function nested in a function, or a class defined in
  one, is read with the function that defines it;
- a module is loaded when reached code imports it (an import inside a function counts only once that function
  is reached; imports under `if TYPE_CHECKING:` never run and are not followed); loading reads its top-level
  code;
- every identifier in reached code (a name, an attribute, a literal given to getattr/hasattr/setattr) reaches
  every top-level function and class of that name in every loaded module, and every method of that name in
  every reached class, whatever the receiver is (`self.x.method(` reaches each reached class's `method`);
- a reached class reaches its dunder methods (called implicitly: `__init__`, `__call__`, `__get__`, ...),
  its methods whose decorators are not plain wrappers (`@router.get(...)`, `@field_validator(...)`: a library
  calls them), and, when it derives from a class outside the project (a library's processor, a pydantic
  model, a thread), every method (the library may call any override); a decorated top-level function with
  such a decorator is reached with its module (a route: with its area's module, which the app imports);
- a getattr/hasattr/setattr with a computed name reaches every property of every reached class.

An entry root is "package.module" (its top-level code and everything it defines, every method of its classes
included: any of it can be called by whoever loads it) or "package.module:function" /
"package.module:Class.method" (its top-level code and that one function). Modules under NOT_SHIPPED (the
command, the local emulation) are followed only from roots inside the same package: the functions do not ship
them.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import botocore.session

ROOT = Path(__file__).resolve().parent.parent
# the product, and the SAM function folders whose modules template.yaml's Handlers name
PROJECT_PACKAGES = ("onward", "handlers", "relay", "projector")
NOT_SHIPPED = ("onward.cli", "onward_infra")  # what the functions do not ship (see Makefile)

# SDK service -> IAM action prefix (DynamoDB Streams' actions are in the dynamodb namespace).
SERVICES = {"dynamodb": "dynamodb", "dynamodbstreams": "dynamodb", "kinesis": "kinesis", "sqs": "sqs",
            "cloudwatch": "cloudwatch"}
# TransactWriteItems / TransactGetItems are not IAM actions: each item's action is authorized on its own.
TRANSACT_ITEM_ACTIONS = {"Put": "dynamodb:PutItem", "Update": "dynamodb:UpdateItem",
                         "Delete": "dynamodb:DeleteItem", "ConditionCheck": "dynamodb:ConditionCheckItem",
                         "Get": "dynamodb:GetItem"}
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*[A-Z0-9]$")
# Decorators that only wrap a function called by its name: a function decorated so is reached by its name.
# Any other decorator (a route, a validator, a registry's) hands the function to a library that calls it.
PLAIN_WRAPPERS = frozenset({"property", "cached_property", "setter", "getter", "deleter", "staticmethod",
                            "classmethod", "abstractmethod", "Component", "overload", "override", "cache",
                            "lru_cache", "contextmanager", "wraps"})
# Base classes outside the project that call no method of a subclass but dunders.
INERT_BASES = frozenset({"object", "Protocol", "Generic", "ABC", "Enum", "StrEnum", "IntEnum", "NamedTuple",
                         "TypedDict"}) | {name for name, value in vars(builtins).items()
                                          if isinstance(value, type) and issubclass(value, BaseException)}
_ATTRIBUTE_FUNCTIONS = {"getattr", "hasattr", "setattr", "delattr"}


@cache
def operations(service: str) -> dict[str, str]:
    """snake_case method name -> API operation name (PutItem), from botocore's model of the service."""
    model = botocore.session.get_session().get_service_model(service)
    return {botocore.xform_name(name): name for name in model.operation_names}


@dataclass(frozen=True)
class SdkCall:
    service: str
    operation: str  # API name, e.g. TransactWriteItems
    module: str
    line: int
    unit: str = ""  # "module:qualname" of the function making the call


@dataclass
class CodeReading:
    """What the code reachable from the roots does, read statically."""

    modules: list[str]  # the project modules loaded
    calls: list[SdkCall] = field(default_factory=list)
    transact_item_kinds: set[str] = field(default_factory=set)  # "Put", "Update", ... in TransactItems
    index_names: set[str] = field(default_factory=set)
    required_resources: set[str] = field(default_factory=set)  # settings.require("jobs_table") -> jobs_table
    environment: set[str] = field(default_factory=set)
    # "module:qualname" of each function read ("module": its top-level code) -> the unit that reached it
    reached_from: dict[str, str] = field(default_factory=dict)

    def actions(self) -> set[str]:
        """IAM actions the calls need."""
        needed: set[str] = set()
        for call in self.calls:
            if call.operation in {"TransactWriteItems", "TransactGetItems"}:
                wanted = {"Get"} if call.operation == "TransactGetItems" else {"Put", "Update", "Delete",
                                                                                 "ConditionCheck"}
                needed |= {TRANSACT_ITEM_ACTIONS[kind] for kind in self.transact_item_kinds & wanted}
            else:
                needed.add(f"{SERVICES[call.service]}:{call.operation}")
        return needed

    def services(self) -> set[str]:
        return {call.service for call in self.calls}


def module_file(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _is_project(name: str, allowed: frozenset[str] = frozenset()) -> bool:
    """Whether `name` is followed: a project module, outside NOT_SHIPPED unless its package is `allowed`."""
    return any(_inside(name, package) for package in PROJECT_PACKAGES) and not any(
        _inside(name, other) and other not in allowed for other in NOT_SHIPPED)


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


def _imports(nodes: Iterable[ast.AST], module: str, is_package: bool, allowed: frozenset[str]) -> set[str]:
    found: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            found.add(source)
            found |= {f"{source}.{alias.name}" for alias in node.names}  # `from pkg import submodule`
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.add(node.args[0].value)
    modules = set()
    for name in found:
        parts = name.split(".")
        for end in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__, a/b/__init__ too
            prefix = ".".join(parts[:end])
            if _is_project(prefix, allowed) and module_file(prefix) is not None:
                modules.add(prefix)
    return modules


def _names(nodes: Iterable[ast.AST]) -> tuple[set[str], set[str], bool]:
    """The plain names the nodes use (`f`), the attribute names (`x.f`, `getattr(x, "f")`), and whether they
    access an attribute by a computed name."""
    plain: set[str] = set()
    names: set[str] = set()
    computed = False
    for node in nodes:
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):  # `x = ...` calls nothing
            plain.add(node.id)
        elif isinstance(node, ast.ImportFrom):  # `from m import f as g`: g() calls f
            plain.update(alias.name for alias in node.names if alias.asname is not None)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in _ATTRIBUTE_FUNCTIONS and len(node.args) >= 2):
            literal = _literal(node.args[1])
            if literal is None:
                computed = True
            else:
                names.add(literal)
    return plain, names, computed


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _called_by_a_library(unit: _Unit) -> bool:
    return any(decorator not in PLAIN_WRAPPERS for decorator in unit.decorators)


def _label(unit: _Unit) -> str:
    return f"{unit.module}:{unit.qualname}" if unit.qualname else unit.module


def _reachable(roots: Iterable[str]) -> tuple[list[_Unit], set[str], dict[str, str]]:
    """The units of code the roots can run, the modules loaded on the way, and for each unit (by label) the
    unit whose code reached it (a root's: "")."""
    roots = list(roots)
    allowed = frozenset(package for package in NOT_SHIPPED
                        if any(_inside(root.partition(":")[0], package) for root in roots))
    modules: dict[str, _Module] = {}
    reached: list[_Unit] = []
    reached_ids: set[int] = set()
    via: dict[str, str] = {}
    classes: list[_Class] = []
    class_ids: set[int] = set()
    class_via: dict[int, str] = {}
    named: dict[str, str] = {}  # identifier -> the label of the first unit that used it
    attributes: dict[str, str] = {}  # the same, for the identifiers a method can be named by
    computed_attribute = ""  # the label of the first unit that accessed an attribute by a computed name
    to_load: list[tuple[str, str]] = []  # (module, the label of the unit that imports it)

    def reach(unit: _Unit, reason: str) -> None:
        nonlocal computed_attribute
        if id(unit) in reached_ids:
            return
        reached_ids.add(id(unit))
        reached.append(unit)
        label = _label(unit)
        via.setdefault(label, reason)
        plain, names, computed = _names(unit.nodes)
        for name in plain | names:
            named.setdefault(name, label)
        # a plain name in a function is a local, a global or a builtin, never a method; in top-level code
        # (a class body) it can be one of the class's methods
        for name in names | (set() if unit.qualname else plain):
            attributes.setdefault(name, label)
        if computed and not computed_attribute:
            computed_attribute = label
        to_load.extend((module, label) for module in _imports(unit.nodes, unit.module, unit.is_package, allowed))

    def reach_class(cls: _Class, reason: str) -> None:
        if id(cls) not in class_ids:
            class_ids.add(id(cls))
            class_via[id(cls)] = reason
            classes.append(cls)
            for base in cls.bases:
                named.setdefault(base, reason)

    def load(name: str, reason: str) -> _Module:
        if name not in modules:
            path = module_file(name)
            if path is None:
                raise ModuleNotFoundError(name)
            module = _split(name, path.name == "__init__.py", ast.parse(path.read_text(), str(path)))
            modules[name] = module
            reach(module.code, reason)
            for _, unit in module.functions:
                if _called_by_a_library(unit):
                    reach(unit, name)
        return modules[name]

    for root in roots:
        name, _, qualname = root.partition(":")
        module = load(name, "")
        found = False
        for function, unit in module.functions:
            if not qualname or function == qualname:
                reach(unit, "")
                found = True
        for cls in module.classes:
            if not qualname or cls.name == qualname:
                reach_class(cls, "")
                found = True
            for method, unit in cls.methods:
                if not qualname or qualname == f"{cls.name}.{method}":
                    reach_class(cls, "")
                    reach(unit, "")
                    found = True
        if qualname and not found:
            raise LookupError(f"{root}: no such function, class or method")

    while True:
        before = (len(reached), len(classes), len(modules))
        while to_load:
            load(*to_load.pop())
        for module in list(modules.values()):
            for function, unit in module.functions:
                if function in named:
                    reach(unit, named[function])
            for cls in module.classes:
                if cls.name in named:
                    reach_class(cls, named[cls.name])
        project_classes = {cls.name for module in modules.values() for cls in module.classes}
        for cls in classes:
            foreign = any(base not in project_classes and base not in INERT_BASES for base in cls.bases)
            for method, unit in cls.methods:
                if method in attributes:
                    reach(unit, attributes[method])
                elif foreign or _is_dunder(method) or _called_by_a_library(unit):
                    reach(unit, class_via[id(cls)])
                elif computed_attribute and {"property", "cached_property"} & set(unit.decorators):
                    reach(unit, computed_attribute)
        if (len(reached), len(classes), len(modules)) == before and not to_load:
            return reached, set(modules), via


def call_path(reading: CodeReading, unit: str) -> list[str]:
    """How the reading reached `unit` ("module:qualname"): the chain of units from a root, each one naming
    (or importing, or defining) the next."""
    chain = [unit]
    while (reason := reading.reached_from.get(chain[-1], "")) and reason not in chain:
        chain.append(reason)
    return chain[::-1]


def reachable_modules(roots: Iterable[str]) -> list[str]:
    """Project modules loaded by the code the roots can run (the roots' modules included)."""
    return sorted(_reachable(roots)[1])


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _client_service(node: ast.AST) -> str | None:
    """`<anything>.client("svc")` -> "svc"."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "client":
        return _literal(node.args[0]) if node.args else _literal(
            next((k.value for k in node.keywords if k.arg == "service_name"), None))
    return None


def _environ_like(node: ast.AST) -> bool:
    """`os.environ`, or a name standing in for it (`source`, `environ`, `env`)."""
    if isinstance(node, ast.Attribute) and node.attr == "environ":
        return True
    return isinstance(node, ast.Name) and node.id in {"environ", "source", "env", "environment"}


def read_code(roots: Iterable[str]) -> CodeReading:
    """Read the code the roots can run ("package.module", or "package.module:function"; see the module's
    docstring)."""
    units, modules, via = _reachable(roots)
    reading = CodeReading(sorted(modules), reached_from=via)
    created = {service for unit in units for node in unit.nodes
               if (service := _client_service(node)) in SERVICES}
    for unit in units:
        name = unit.module
        for node in unit.nodes:
            if isinstance(node, ast.Dict):
                reading.transact_item_kinds |= {key for k in node.keys
                                                if (key := _literal(k)) in TRANSACT_ITEM_ACTIONS}
            if isinstance(node, ast.keyword) and node.arg == "IndexName" and (index := _literal(node.value)):
                reading.index_names.add(index)
            if isinstance(node, ast.Dict):
                for key_node, value_node in zip(node.keys, node.values, strict=True):  # `**spread`: key None
                    if _literal(key_node) == "IndexName" and (index := _literal(value_node)):
                        reading.index_names.add(index)
            if (isinstance(node, ast.Subscript) and _environ_like(node.value)
                    and (variable := _literal(node.slice)) and _ENV_NAME.match(variable)):
                reading.environment.add(variable)
            # a helper handed the environment and a variable's name: `number_setting(source, "X", 0)`
            if (isinstance(node, ast.Call) and len(node.args) >= 2 and _environ_like(node.args[0])
                    and (variable := _literal(node.args[1])) and _ENV_NAME.match(variable)):
                reading.environment.add(variable)
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            method, receiver = node.func.attr, node.func.value
            first = _literal(node.args[0]) if node.args else None
            if method in {"get", "getenv"} and first and _ENV_NAME.match(first) and (
                    _environ_like(receiver) or (isinstance(receiver, ast.Name) and receiver.id == "os")):
                reading.environment.add(first)
            if method == "require" and first:
                reading.required_resources.add(first)
                reading.environment.add(first.upper())
            if method == "get_paginator" and first:
                method = first
            direct = _client_service(receiver)
            candidates = [s for s in ([direct] if direct else sorted(created)) if method in operations(s)]
            if len(candidates) > 1:
                raise AmbiguousCall(f"{name}:{node.lineno}: .{method}() could be {candidates}; call it on "
                                    f"`<settings>.client(\"...\")` directly or name the client distinctly")
            if candidates:
                service = candidates[0]
                reading.calls.append(SdkCall(service, operations(service)[method], name, node.lineno,
                                            _label(unit)))
    return reading


class AmbiguousCall(ValueError):
    """An SDK method name that more than one of the clients in reach offer."""
