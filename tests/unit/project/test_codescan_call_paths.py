"""tests/codescan.py reads by call path: what each resolution rule reaches, on small packages written for the test
(the `package` fixture of tests/unit/project/conftest.py points the reading at them instead of the project), and on
the project itself.

Each test fails when its rule goes: e.g. without following `self.x.method(` by method name the store's scan would
be missed (under-approximation, the failure the policies must never have); without stopping at the functions no
path names, a handler would again be granted everything its modules can do.
"""

from __future__ import annotations

import pytest

from tests.codescan import call_path, reachable_modules, read_code

STORE = '''
    import boto3

    class Store:
        def __init__(self):
            self._db = boto3.client("dynamodb")

        def get(self, key):
            return self._db.get_item(TableName="t", Key=key)

        def everything(self):
            return self._db.scan(TableName="t")
'''


def test_a_method_is_read_only_where_some_reached_code_names_it(package) -> None:
    package(**{"pkg.store": STORE, "pkg.handler": '''
        from pkg.store import Store

        class Service:
            def __init__(self):
                self.store = Store()

        def handler(event, context):
            return Service().store.get(event["key"])
    '''})
    reading = read_code(["pkg.handler:handler"])
    assert reading.actions() == {"dynamodb:GetItem"}  # not Scan: nothing on the path names `everything`
    assert "pkg.store" in reachable_modules(["pkg.handler:handler"])  # although its module is loaded
    assert call_path(reading, "pkg.store:Store.get") == ["pkg.handler:handler", "pkg.store:Store.get"]
    # the module as a root: any of its code can be called, so the scan is read
    assert "dynamodb:Scan" in read_code(["pkg.store"]).actions()


def test_callbacks_getattr_literals_and_dunders_are_followed(package) -> None:
    package(**{"pkg.store": STORE, "pkg.handler": '''
        import threading
        from pkg.store import Store

        class Runner:
            def __call__(self):
                return getattr(Store(), "everything")()

        def handler(event, context):
            threading.Thread(target=Runner()).start()
    '''})
    assert read_code(["pkg.handler:handler"]).actions() == {"dynamodb:Scan"}


def test_a_computed_getattr_reaches_every_property(package) -> None:
    package(**{"pkg.handler": '''
        import boto3

        class Rows:
            @property
            def count(self):
                return boto3.client("dynamodb").scan(TableName="t")["Count"]

        def handler(event, context):
            return getattr(Rows(), event["field"])
    '''})
    assert read_code(["pkg.handler:handler"]).actions() == {"dynamodb:Scan"}


def test_what_a_library_calls_is_read_with_its_class_or_module(package) -> None:
    """A route function (registered by a decorator), and the override of a library class's hook."""
    package(**{"pkg.handler": '''
        import boto3
        from somelibrary import Router, BaseProcessor

        app = Router()

        @app.get("/things")
        def things():
            return boto3.client("dynamodb").query(TableName="t")

        class Processor(BaseProcessor):
            def _process_record(self, record):
                return boto3.client("dynamodb").put_item(TableName="t", Item=record)

        def handler(event, context):
            return Processor().process(event)
    '''})
    assert read_code(["pkg.handler:handler"]).actions() == {"dynamodb:Query", "dynamodb:PutItem"}


def test_a_dependency_a_route_declares_in_its_annotations_is_read_with_the_route(package) -> None:
    """`Annotated[T, Depends(f)]`: the library calls f before the route, whose body never names it (the API's
    caller checks are such dependencies); other annotations call nothing."""
    package(**{"pkg.handler": '''
        import os
        from typing import Annotated
        from somelibrary import Depends, Query, Router

        app = Router()

        def caller():
            return os.environ.get("ONWARD_TOKENS")

        def annotated_only():
            return os.environ.get("ONWARD_NEVER")

        @app.get("/things")
        def things(who: Annotated[str, Depends(caller)], limit: Annotated[int, Query(annotated_only)] = 1):
            return who

        def handler(event, context):
            return app.resolve(event, context)
    '''})
    assert read_code(["pkg.handler:handler"]).environment == {"ONWARD_TOKENS"}


def test_a_lazy_import_counts_only_on_a_path_and_type_checking_imports_never(package) -> None:
    package(**{"pkg.store": STORE, "pkg.wiring": '''
        from typing import TYPE_CHECKING

        if TYPE_CHECKING:
            from pkg.store import Store

        class Component:
            def __init__(self, build):
                self.build = build

        class Deployment:
            @Component
            def store(self) -> "Store":
                from pkg.store import Store
                return Store()

            @Component
            def other(self):
                return None
    ''', "pkg.quiet": '''
        from pkg.wiring import Deployment

        def handler(event, context):
            return Deployment().other
    ''', "pkg.busy": '''
        from pkg.wiring import Deployment

        def handler(event, context):
            return Deployment().store.everything()
    '''})
    assert "pkg.store" not in reachable_modules(["pkg.quiet:handler"])
    assert read_code(["pkg.quiet:handler"]).actions() == set()
    assert read_code(["pkg.busy:handler"]).actions() == {"dynamodb:Scan"}


def test_a_plain_name_in_a_function_is_no_method_and_an_assignment_calls_nothing(package) -> None:
    package(**{"pkg.store": STORE, "pkg.handler": '''
        from pkg.store import Store

        def handler(event, context):
            everything = all(event)  # a local and a builtin: neither is Store.everything
            store = Store()
            return store.get(everything)
    '''})
    assert read_code(["pkg.handler:handler"]).actions() == {"dynamodb:GetItem"}


def test_the_command_package_is_followed_only_from_its_own_roots(package) -> None:
    package(**{"pkg.store": STORE, "pkg.cli.main": '''
        def cmd_dump():
            from pkg.cli.helpers import dump
            return dump()
    ''', "pkg.cli.helpers": '''
        from pkg.store import Store

        def dump():
            return Store().everything()
    ''', "pkg.handler": '''
        def handler(event, context):
            from pkg.cli.main import cmd_dump
            return cmd_dump()
    '''})
    assert read_code(["pkg.cli.main:cmd_dump"]).actions() == {"dynamodb:Scan"}
    assert read_code(["pkg.handler:handler"]).actions() == set()  # the functions do not ship pkg.cli
    with pytest.raises(LookupError):
        read_code(["pkg.cli.main:cmd_missing"])


def test_on_the_project_the_lambda_functions_no_longer_inherit_their_modules_scans() -> None:
    """The reaper loads onward.store.dynamo.recorder, whose all_jobs scans the jobs table, and onward.pipeline.outbox,
    which scans
    the outbox; no call path of the reaper's handler reaches either (only the operator commands do)."""
    roots = ["onward.entrypoints.reaper"]
    assert {"onward.store.dynamo.recorder", "onward.pipeline.outbox"} <= set(reachable_modules(roots))
    reaper = read_code(roots)
    assert "dynamodb:Scan" not in reaper.actions()
    assert "onward.store.dynamo.recorder:DynamoRecorder.all_jobs" not in reaper.reached_from
    # read by module (every method of the recorder, with the client the wiring makes for it), it scans
    assert "dynamodb:Scan" in read_code(["onward.store.dynamo.recorder", "onward.bootstrap:Deployment.job_store"]
                                        ).actions()
    assert any(call.operation == "Query" and call.module == "onward.store.dynamo.recorder" for call in reaper.calls)


def test_a_main_guard_runs_only_as_a_script(package) -> None:
    """`python -m pkg.cli.main` would run the guard; importing the module (a console script calling one function)
    does not: rooted at cmd_work, the reading must not take in what the guard's `main` dispatches to."""
    package(**{"pkg.store": STORE, "pkg.cli.main": '''
        from pkg.store import Store

        def cmd_work():
            return Store().get({})

        def cmd_dump():
            return Store().everything()

        def main():
            return {"work": cmd_work, "dump": cmd_dump}

        if __name__ == "__main__":
            main()
    '''})
    assert read_code(["pkg.cli.main:cmd_work"]).actions() == {"dynamodb:GetItem"}
    assert read_code(["pkg.cli.main:main"]).actions() == {"dynamodb:GetItem", "dynamodb:Scan"}


def test_a_function_imported_under_another_name_is_followed(package) -> None:
    package(**{"pkg.store": '''
        import boto3

        def scan_everything():
            return boto3.client("dynamodb").scan(TableName="t")
    ''', "pkg.handler": '''
        from pkg.store import scan_everything as dump

        def handler(event, context):
            return dump()
    '''})
    assert read_code(["pkg.handler:handler"]).actions() == {"dynamodb:Scan"}
