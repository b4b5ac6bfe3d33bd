"""One deployment of template.yaml on the embedded endpoint lent to one user after another (the tests' shared
stack), every table emptied in between, replaced when a user did more than read and write items."""

from __future__ import annotations

import itertools
import threading
from collections import Counter

from onward.store.dynamo.recorder import PARTITION_READER_THREAD
from onward_infra.endpoint import REQUEST_THREAD_NAME, DeployedStack, EmbeddedEndpoint
from onward_infra.moto_fixes import server


def harmless_to_share(target: str) -> bool:
    """Whether a request (by X-Amz-Target) leaves a stack fit for its next user once the tables are emptied:
    DynamoDB's item reads and writes, and any Describe or List. Not reading or writing stream records (old
    ones stay), changing a table, a stream or a queue."""
    service, _, operation = target.partition(".")
    return (service.startswith("DynamoDB_") and operation in server.PLAIN_JSON_OPERATIONS) or operation.startswith(
        ("Describe", "List"))


# In every environment SharedStack lends, a value of its own: whatever a process keeps per environment (as a
# warm Lambda would: onward/bootstrap.py's Deployment.from_environment, its job store's tenant cache) is
# built afresh for each user, as for a freshly deployed stack, not carried over from a user whose items
# are gone.
LEASE_VARIABLE = "ONWARD_STACK_LEASE"


class SharedStack:
    """One deployment of template.yaml lent to one user after another (tests, one at a time), each finding
    every table empty as if the stack were just deployed, for users that only read and write items
    (`harmless_to_share`). A fresh deployment replaces it for the next user when the last one did anything
    else, left a thread of its own running (it could still write), or anything named the stack between two
    users (`retired` counts why)."""

    _numbers = itertools.count()  # of the deployments, across instances: stack names are unique per endpoint

    def __init__(self, endpoint: EmbeddedEndpoint, prefix: str = "shared") -> None:
        self._endpoint, self._prefix = endpoint, prefix
        self._leases = itertools.count()
        self._client = endpoint.client("dynamodb")
        self._stack: DeployedStack | None = None
        self._name = ""  # the stack's; "<name>-" begins the name of each of its resources
        self._requests: Counter[str] = Counter()  # every request naming the stack, kept by the endpoint
        self._returned: Counter[str] = Counter()  # _requests when last given back
        self._lent: Counter[str] | None = None  # _requests when lent, while lent
        self._threads: set[threading.Thread] = set()
        self.retired: Counter[str] = Counter()

    def lend(self) -> DeployedStack:
        """The stack, every table of it checked empty (through the API), its environment with LEASE_VARIABLE
        set to a value never lent before. Give it back before lending again."""
        assert self._lent is None, "the shared stack is lent already"
        if self._stack is not None and self._requests != self._returned:
            self._retire("touched between users")
        if self._stack is None:
            self._name = f"{self._prefix}-{next(self._numbers)}"
            self._stack = self._endpoint.deploy(self._name)
            self._requests = self._endpoint.watch(f"{self._name}-")  # shared-0-jobs and the like
        for table in self._endpoint.empty_tables(self._stack):
            found = self._client.scan(TableName=table, Limit=1, ConsistentRead=True)["Items"]
            assert not found, f"{table} still holds {found} after being emptied"
        self._lent, self._threads = Counter(self._requests), set(threading.enumerate())
        return DeployedStack({**self._stack.environment, LEASE_VARIABLE: f"{self._name}#{next(self._leases)}"})

    def give_back(self) -> list[str]:
        """Take the stack back; returns the requests its user made that a shared stack cannot take (sorted
        X-Amz-Targets), to be reported: that user needs a stack of its own."""
        assert self._lent is not None, "the shared stack is not lent"
        misuse = sorted(target for target in self._requests - self._lent if not harmless_to_share(target))
        # The process's own kept pools are nobody's: the endpoint's request threads, the claim's partition readers.
        left_running = [thread for thread in threading.enumerate()
                        if thread not in self._threads and thread.name != REQUEST_THREAD_NAME
                        and not thread.name.startswith(PARTITION_READER_THREAD)]
        self._returned, self._lent = Counter(self._requests), None
        if misuse:
            self._retire("misused")
        elif left_running:
            self._retire("threads left running")
        return misuse

    def _retire(self, reason: str) -> None:
        self.retired[reason] += 1
        self._stack = None
        self._endpoint.unwatch(f"{self._name}-")
