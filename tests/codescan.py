"""Static reading of the project's own code, for the template tests: which project modules a Lambda handler
can reach, which AWS SDK operations those modules call, and which environment variables they read.

Nothing is imported or executed: modules are parsed with `ast`. The reading is per MODULE, not per code
path: if a module that a handler imports calls `scan` anywhere, the handler is taken to call `scan`. That
over-approximates (a function is granted what its modules can do), never under-approximates, as long as
the code follows four conventions the tests rely on:

- AWS clients are made with a literal service name (`settings.client("dynamodb")`, `boto3.client("kinesis")`);
- SDK operations are called as attributes (`self._db.put_item(...)`, `get_paginator("query")`), with
  `IndexName="..."` literals for index queries and `settings.require("<resource>")` for resource names;
- environment variables are read with literal names (`os.environ.get("X")`, `source.get("X")` where
  `source` is `os.environ` or a mapping standing in for it, `helper(source, "X", ...)`,
  `settings.require("jobs_table")` -> JOBS_TABLE);
- components come from the wiring class (onward/handlers/bootstrap.py's Deployment: a class with `@Component`
  methods) by attribute, `deployment.relay`: each of its methods (not the dunders) is read only where a
  reached module names it, with the imports inside it, so a function is granted what the components it
  names can do, not everything the wiring can build.

Imports under `if TYPE_CHECKING:` never run and are not followed.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import botocore.session

ROOT = Path(__file__).resolve().parent.parent
PROJECT_PACKAGE = "onward"
NOT_SHIPPED = ("onward.cli", "onward.local")  # what the functions do not ship (see Makefile)

# SDK service -> IAM action prefix (DynamoDB Streams' actions are in the dynamodb namespace).
SERVICES = {"dynamodb": "dynamodb", "dynamodbstreams": "dynamodb", "kinesis": "kinesis", "sqs": "sqs",
            "cloudwatch": "cloudwatch"}
# TransactWriteItems / TransactGetItems are not IAM actions: each item's action is authorized on its own.
TRANSACT_ITEM_ACTIONS = {"Put": "dynamodb:PutItem", "Update": "dynamodb:UpdateItem",
                         "Delete": "dynamodb:DeleteItem", "ConditionCheck": "dynamodb:ConditionCheckItem",
                         "Get": "dynamodb:GetItem"}
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*[A-Z0-9]$")


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


@dataclass
class CodeReading:
    """What a handler's reachable modules do, read statically."""

    modules: list[str]
    calls: list[SdkCall] = field(default_factory=list)
    transact_item_kinds: set[str] = field(default_factory=set)  # "Put", "Update", ... in TransactItems
    index_names: set[str] = field(default_factory=set)
    required_resources: set[str] = field(default_factory=set)  # settings.require("jobs_table") -> jobs_table
    environment: set[str] = field(default_factory=set)

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


def _is_project(name: str) -> bool:
    inside = name == PROJECT_PACKAGE or name.startswith(PROJECT_PACKAGE + ".")
    return inside and not any(name == other or name.startswith(other + ".") for other in NOT_SHIPPED)


@dataclass(frozen=True)
class _Unit:
    """Code that runs together: a module (but its wiring methods), or one wiring method."""

    module: str
    is_package: bool
    nodes: list[ast.AST]


def _is_type_checking(node: ast.If) -> bool:
    return ((isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
            or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING"))


def _wiring_methods(node: ast.AST) -> list[ast.FunctionDef]:
    """The methods of a wiring class (one with `@Component` methods) but its dunders; [] for other nodes."""
    if not isinstance(node, ast.ClassDef):
        return []
    methods = [item for item in node.body if isinstance(item, ast.FunctionDef)]
    if not any(isinstance(d, ast.Name) and d.id == "Component" for m in methods for d in m.decorator_list):
        return []
    return [method for method in methods if not method.name.startswith("__")]


def _nodes(root: ast.AST, wiring: dict[str, ast.FunctionDef]) -> list[ast.AST]:
    """The nodes of `root` that run with it: not under `if TYPE_CHECKING:`, not inside a wiring method
    (those are put in `wiring` by name, to be read only where they are named)."""
    found: list[ast.AST] = []
    todo = [root]
    while todo:
        node = todo.pop()
        found.append(node)
        methods = _wiring_methods(node)
        wiring.update({method.name: method for method in methods})
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                todo.extend(child.orelse)
            elif child not in methods:
                todo.append(child)
    return found


def _imports(nodes: Iterable[ast.AST], module: str, is_package: bool) -> set[str]:
    found: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in nodes:  # imports inside functions count too (lazy imports run as well)
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
            if _is_project(prefix) and module_file(prefix) is not None:
                modules.add(prefix)
    return modules


def _reachable(roots: Iterable[str]) -> list[_Unit]:
    """The code the root modules run: the project modules they import, directly or not (roots included),
    and the wiring methods named in them (with what those import and name in turn)."""
    units: list[_Unit] = []
    seen: set[str] = set()
    wiring: dict[str, tuple[str, bool, ast.FunctionDef]] = {}  # method name -> (module, is_package, method)
    named: set[str] = set()  # attribute names used by the code read so far
    taken: set[str] = set()
    todo = list(roots)

    def read(unit: _Unit) -> None:
        units.append(unit)
        todo.extend(_imports(unit.nodes, unit.module, unit.is_package) - seen)
        named.update(node.attr for node in unit.nodes if isinstance(node, ast.Attribute))

    while True:
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            path = module_file(name)
            if path is None:
                raise ModuleNotFoundError(name)
            seen.add(name)
            is_package = path.name == "__init__.py"
            methods: dict[str, ast.FunctionDef] = {}
            nodes = _nodes(ast.parse(path.read_text(), str(path)), methods)
            wiring.update({method: (name, is_package, tree) for method, tree in methods.items()})
            read(_Unit(name, is_package, nodes))
        wanted = sorted((named & wiring.keys()) - taken)
        if not wanted:
            return units
        for method in wanted:
            taken.add(method)
            module, is_package, tree = wiring[method]
            read(_Unit(module, is_package, _nodes(tree, {})))


def reachable_modules(roots: Iterable[str]) -> list[str]:
    """Project modules imported, directly or not, by the root modules (roots included)."""
    return sorted({unit.module for unit in _reachable(roots)})


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
    """Read every module reachable from `roots`."""
    units = _reachable(roots)
    reading = CodeReading(sorted({unit.module for unit in units}))
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
                reading.calls.append(SdkCall(service, operations(service)[method], name, node.lineno))
    return reading


class AmbiguousCall(ValueError):
    """An SDK method name that more than one of the clients in reach offer."""
