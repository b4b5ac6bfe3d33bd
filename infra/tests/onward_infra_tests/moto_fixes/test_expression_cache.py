"""The one expression cache of the endpoint's fixes (infra/onward_infra/moto_fixes/expression_cache.py): at most
its bound of entries, the oldest dropped first, and every cache of the fixes is one of it."""

from __future__ import annotations

import sys
import threading

import pytest
from moto.dynamodb.parsing.expressions import UpdateExpressionParser

from onward_infra.moto_fixes import conditions, expressions, updates
from onward_infra.moto_fixes.expression_cache import MAX_KEPT, ExpressionCache


def test_keeping_past_the_bound_drops_the_oldest_and_only_it() -> None:
    """Without the bound the endpoint would keep every expression a client ever sent (a leak); with another
    rule (dropping everything, or the newest) the expressions in use would be parsed again."""
    cache: ExpressionCache[str, int] = ExpressionCache(bound=3)
    for n, expression in enumerate(["a", "b", "c", "d", "e"]):
        assert cache.keep(expression, n) == n
        assert len(cache) <= 3
    assert dict(cache) == {"c": 2, "d": 3, "e": 4}


def test_keeping_a_kept_key_again_replaces_its_value_and_drops_nothing() -> None:
    cache: ExpressionCache[str, int] = ExpressionCache(bound=2)
    cache.keep("a", 1)
    cache.keep("b", 2)
    cache.keep("a", 3)
    assert dict(cache) == {"a": 3, "b": 2}


def test_a_cache_keeps_at_least_one_entry() -> None:
    with pytest.raises(ValueError, match="at least one"):
        ExpressionCache(bound=0)


def test_every_cache_of_the_fixes_is_the_one_cache_with_the_one_bound() -> None:
    """Four caches with three eviction rules before: parsed update expressions and their pickles, the names
    an update expression uses, parsed condition expressions, update shapes."""
    caches = [expressions._parsed, expressions._pickles, expressions._names_used, conditions._kept, updates._shapes]
    assert all(type(cache) is ExpressionCache and cache.bound == MAX_KEPT for cache in caches)


def test_a_tree_and_its_pickle_are_dropped_together(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parsed update expressions past the bound: the trees dropped are exactly those whose pickles are
    dropped (a pickle kept for a dropped tree would hold it alive; a tree without its pickle would be deep-
    copied at each use)."""
    monkeypatch.setattr(expressions, "_parsed", ExpressionCache(bound=4))
    monkeypatch.setattr(expressions, "_pickles", ExpressionCache(bound=4))
    for n in range(10):
        expressions.make(UpdateExpressionParser, f"SET #a = :v{n}")
    kept_trees = list(expressions._parsed.values())
    assert [id(tree) for tree in kept_trees] == list(expressions._pickles)
    assert [tree for tree, _ in expressions._pickles.values()] == kept_trees
    assert [expression for _, expression in expressions._parsed] == [f"SET #a = :v{n}" for n in range(6, 10)]


def test_threads_keeping_at_once_never_break_the_bound() -> None:
    """The endpoint serves requests in threads: evictions racing (two threads dropping the oldest at once) must
    neither raise nor let the cache grow past its bound. Without the lock in `keep`, `del` of a key another
    thread just dropped raised KeyError inside a request."""
    cache: ExpressionCache[int, int] = ExpressionCache(bound=8)
    errors: list[BaseException] = []

    def keep_many(start: int) -> None:
        try:
            for number in range(start, start + 5_000):
                cache.keep(number, number)
        except BaseException as error:  # noqa: BLE001 - any failure is the finding
            errors.append(error)

    threads = [threading.Thread(target=keep_many, args=(index * 10_000,)) for index in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch every few bytecodes, as on a loaded endpoint at its worst
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == [] and len(cache) <= 8
