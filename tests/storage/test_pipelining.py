"""Batches made one ahead in a worker thread (src/ragvet/storage/pipelining.py): the
source's items in its order, made while the consumer holds the one before, its
exception raised in its place, and no more than one item made ahead."""

from __future__ import annotations

import threading

import pytest

from ragvet.errors import InputError, Problem
from ragvet.storage.pipelining import ahead

WAIT = 60  # seconds: only a guard against a hang, never a measured time


def test_the_items_in_order_each_made_in_the_worker():
    makers: list[str] = []

    def source():
        for n in range(5):
            makers.append(threading.current_thread().name)
            yield n * n

    assert list(ahead(source())) == [0, 1, 4, 9, 16]
    assert len(makers) == 5 and all(name.startswith("ragvet-ahead") for name in makers)
    assert list(ahead([])) == [] and list(ahead(iter(["a"]))) == ["a"]


def test_the_next_item_is_made_while_the_consumer_holds_one():
    making_second = threading.Event()

    def source():
        yield "first"
        making_second.set()
        yield "second"

    items = ahead(source())
    assert next(items) == "first"
    assert making_second.wait(WAIT)  # made before the consumer asked for it: without ahead, never set
    assert next(items) == "second"


def test_an_error_is_raised_in_its_place_after_every_item_before_it():
    problem = Problem("run.parquet", "the run's rows are not in case order near row 13", "re-run")

    def source():
        yield 1
        yield 2
        raise InputError([problem])

    got = []
    with pytest.raises(InputError) as raised:
        for item in ahead(source()):
            got.append(item)
    assert got == [1, 2] and raised.value.problems == [problem]


def test_closing_early_makes_no_more_than_one_item_ahead():
    made = []

    def source():
        for n in range(100):
            made.append(n)
            yield n

    items = ahead(source())
    assert next(items) == 0
    items.close()  # waits for the item in the making
    assert made == [0, 1]
