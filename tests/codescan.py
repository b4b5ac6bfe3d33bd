"""Static reading of the project's own code, for the template tests: which code an entry point can run,
which AWS SDK operations that code calls, on which table, index or stream (tests/codescan_targets.py), and
which environment variables it reads.

Nothing is imported or executed: modules are parsed with `ast`. The reading follows CALL PATHS, not modules:
from the entry points it follows the functions and methods they can call, over a conservative call graph of
the project's modules, so a function is granted what its call paths can do, not everything the modules it
imports can do. The graph may over-approximate (follow a call that never happens) but never under-approximates,
as long as the code follows the conventions the tests rely on:

- AWS clients are made with a literal service name (`settings.client("dynamodb")`, `boto3.client("kinesis")`);
- SDK operations are called as attributes (`self._db.put_item(...)`, `get_paginator("query")`); their
  TableName, IndexName and stream names come from `settings.require("<resource>")`, literals, module constants
  or f-strings of them, followed back through the AST to the call (tests/codescan_targets.py, which fails the
  reading where it cannot follow one);
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
  every reached class, whatever the receiver is (`self.x.method(` reaches each reached class's `method`),
  but for three uses that cannot call a plain method: `m.f` where `m` is a project module the module's top
  level imports (`lifecycle.claim(...)`: a function, not Claimer.claim), an attribute assigned (`self.events =
  {}`: only a property's setter of that name runs), and an attribute used as a value (`x.events.get(...)`,
  `x.events[k]`: a method object has neither, so only a decorated method of that name, a property or a
  component, is reached);
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

from tests.codescan_modules import Scope, Unresolved
from tests.codescan_targets import NAMES, Targets, call_accesses, named
from tests.codescan_units import (
    _Class,
    _is_dunder,
    _literal,
    _Module,
    _names,
    _split,
    _Unit,
)

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
TRANSACTIONS = {"TransactWriteItems": {"Put", "Update", "Delete", "ConditionCheck"}, "TransactGetItems": {"Get"}}
# SQS's batch operations are no IAM actions: the single message's action authorizes its batch
# (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-batch-api-actions.html).
BATCH_AUTHORIZED_AS = {"sqs:SendMessageBatch": "sqs:SendMessage", "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
                       "sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility"}
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


Access = tuple[str, str, str]  # (IAM action, resource the settings name, "arn" | "stream" | "index/<name>")


@dataclass
class CodeReading:
    """What the code reachable from the roots does, read statically."""

    modules: list[str]  # the project modules loaded
    calls: list[SdkCall] = field(default_factory=list)
    # each action on each table, index or stream the calls can name -> the first call ("module:line") doing it
    accesses: dict[Access, str] = field(default_factory=dict)
    required_resources: set[str] = field(default_factory=set)  # settings.require("jobs_table") -> jobs_table
    environment: set[str] = field(default_factory=set)
    # "module:qualname" of each function read ("module": its top-level code) -> the unit that reached it
    reached_from: dict[str, str] = field(default_factory=dict)

    def actions(self) -> set[str]:
        """IAM actions the calls need (a transaction's: its items' Put / Update / ConditionCheck / ...)."""
        return {action for action, _, _ in self.accesses}

    @property
    def index_names(self) -> set[str]:
        return {part.removeprefix("index/") for _, _, part in self.accesses if part.startswith("index/")}

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


def _module_names(tree: ast.Module, module: str, is_package: bool) -> frozenset[str]:
    """The names a module's top level binds to project modules (`import a.b` binds `a`; `from a import b`,
    `b` when a.b is a module)."""
    bound: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in tree.body:
        if isinstance(node, ast.Import):
            bound |= {alias.asname or alias.name.partition(".")[0] for alias in node.names
                      if _is_project(alias.name, frozenset(NOT_SHIPPED))}
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                source = f"{base}.{node.module}" if node.module else base
            bound |= {alias.asname or alias.name for alias in node.names
                      if module_file(f"{source}.{alias.name}") is not None}
    return frozenset(bound)



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
    assigned: dict[str, str] = {}  # the same, for the attributes assigned (a setter's name)
    valued: dict[str, str] = {}  # the same, for the attributes used as values (a decorated method's name)
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
        used = _names(unit.nodes, modules[unit.module].module_names)
        for name in used.stored:
            assigned.setdefault(name, label)
        for name in used.valued:
            valued.setdefault(name, label)
        for name in used.plain | used.attributes | used.valued:
            named.setdefault(name, label)
        # a plain name in a function is a local, a global or a builtin, never a method; in top-level code
        # (a class body) it can be one of the class's methods
        for name in used.attributes | (set() if unit.qualname else used.plain):
            attributes.setdefault(name, label)
        if used.computed and not computed_attribute:
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
            tree = ast.parse(path.read_text(), str(path))
            module = _split(name, path.name == "__init__.py", tree)
            module.module_names = _module_names(tree, name, path.name == "__init__.py")
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
                elif method in assigned and "setter" in unit.decorators:
                    reach(unit, assigned[method])
                elif method in valued and unit.decorators:
                    reach(unit, valued[method])
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
    docstring), and the target of each SDK call (tests/codescan_targets.py: Unresolved when one cannot be told)."""
    units, modules, via = _reachable(roots)
    reading = CodeReading(sorted(modules), reached_from=via)
    created = {service for unit in units for node in unit.nodes
               if (service := _client_service(node)) in SERVICES}
    targets = Targets(_source, _is_project, modules,
                      [(node, unit.module, unit.qualname) for unit in units for node in unit.nodes
                       if isinstance(node, ast.Call)])
    transactions: set[str] = set()  # the item kinds ("Put", ...) of the transactions the calls send
    items: list[tuple[str, ast.expr, Scope, int]] = []  # the dicts' {"Put": ...} items
    for unit in units:
        name = unit.module
        scope = targets.scope_of(unit.module, unit.qualname)
        for node in unit.nodes:
            if isinstance(node, ast.Dict):
                items += [(kind, value, scope, node.lineno) for key, value in zip(node.keys, node.values, strict=True)
                          if (kind := _literal(key)) in TRANSACT_ITEM_ACTIONS]
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
            request: ast.Call | None = node
            if method == "get_paginator" and first:
                method = first
                request = next((c for c in unit.nodes if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                                and c.func.attr == "paginate" and c.func.value is node), None)
            direct = _client_service(receiver)
            candidates = [s for s in ([direct] if direct else sorted(created)) if method in operations(s)]
            if len(candidates) > 1:
                raise AmbiguousCall(f"{name}:{node.lineno}: .{method}() could be {candidates}; call it on "
                                    f"`<settings>.client(\"...\")` directly or name the client distinctly")
            if not candidates:
                continue
            service = candidates[0]
            operation = operations(service)[method]
            reading.calls.append(SdkCall(service, operation, name, node.lineno, _label(unit)))
            if operation in TRANSACTIONS:
                transactions |= TRANSACTIONS[operation]
                continue
            if request is None:
                raise Unresolved(f"{name}:{node.lineno}: a paginator whose paginate() is not called on it")
            action = f"{SERVICES[service]}:{operation}"
            for access in call_accesses(targets, request, scope, BATCH_AUTHORIZED_AS.get(action, action),
                                        request_members(service, operation)):
                reading.accesses.setdefault(access, f"{name}:{node.lineno}")
    for kind, value, scope, line in items:
        if kind in transactions:
            for shape in targets.shapes(value, scope):
                for table in named(shape, "TableName", NAMES, f"{scope.module}:{line}"):
                    reading.accesses.setdefault((TRANSACT_ITEM_ACTIONS[kind], table, "arn"), f"{scope.module}:{line}")
    return reading


def _source(module: str) -> tuple[Path, bool] | None:
    path = module_file(module)
    return None if path is None else (path, path.name == "__init__.py")


@cache
def request_members(service: str, operation: str) -> frozenset[str]:
    """The members of an operation's request (TableName, StreamName, ...), from botocore's model."""
    shape = botocore.session.get_session().get_service_model(service).operation_model(operation).input_shape
    return frozenset(shape.members) if shape is not None else frozenset()


class AmbiguousCall(ValueError):
    """An SDK method name that more than one of the clients in reach offer."""
