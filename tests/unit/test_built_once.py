"""The ledger and read models a worker builds on first use: with the database down, the
requests that waited on a failed build fail with it, and the next request tries again."""

from __future__ import annotations

import threading
import time

import pytest
from eventsourcing.persistence import OperationalError

from api.services import _BuiltOnce


def test_the_threads_that_waited_on_a_failed_build_fail_with_it_and_a_later_one_tries_again():
    # Each waiting thread tried its own build in turn: four requests to a worker whose
    # database was down answered after 5, 10, 15 and 20 s.
    started, release = threading.Event(), threading.Event()
    builds: list[int] = []

    def build() -> str:
        builds.append(1)
        started.set()
        release.wait(10)
        raise OperationalError("the database does not answer")

    once: _BuiltOnce[str] = _BuiltOnce(build)
    failed: list[BaseException] = []

    def ask() -> None:
        try:
            once.get()
        except OperationalError as error:
            failed.append(error)

    asking = [threading.Thread(target=ask) for _ in range(4)]
    asking[0].start()
    assert started.wait(10)
    for thread in asking[1:]:
        thread.start()
    time.sleep(0.2)  # the three others have asked, and wait for the lock
    release.set()
    for thread in asking:
        thread.join(10)
    assert len(builds) == 1
    assert len(failed) == 4
    assert all(str(error) == "the database does not answer" for error in failed)
    with pytest.raises(OperationalError):  # asked after the failure: built again
        once.get()
    assert len(builds) == 2


def test_a_thing_built_is_kept_and_closed_once():
    once: _BuiltOnce[list[str]] = _BuiltOnce(lambda: ["built"])
    assert once.get() is once.get()
    closed: list[list[str]] = []
    once.close(closed.append)
    once.close(closed.append)
    assert closed == [["built"]]
