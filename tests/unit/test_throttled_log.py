"""Warnings a caller can cause at will are throttled by source, and none goes uncounted."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from api.throttled_log import ThrottledLog

log = logging.getLogger("pitboss.test.throttled")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def said(caplog):
    caplog.set_level(logging.WARNING, logger=log.name)
    return lambda: [r.getMessage() for r in caplog.records if r.name == log.name]


def test_a_flood_from_one_source_is_counted_not_logged_and_others_are_heard(said):
    clock = Clock()
    throttle = ThrottledLog(lines_per_window=3, window_s=60, clock=clock)
    for n in range(8):
        throttle.warning(log, "refusals of eve", "refused eve %d", n)
    throttle.warning(log, "refusals of bob", "refused bob")  # another source: its own lines
    clock.now += 59
    throttle.warning(log, "refusals of eve", "refused eve late")  # same window: counted
    assert said() == ["refused eve 0", "refused eve 1", "refused eve 2",
                      "more than 3 warnings of refusals of eve in 60 s: the next are counted, "
                      "and their number logged with the first one after that",
                      "refused bob"]
    clock.now += 1  # a new window: the count comes before its first line
    throttle.warning(log, "refusals of eve", "refused eve again")
    assert said()[5:] == ["6 more warnings of refusals of eve were not logged in the 60 s "
                          "before this one", "refused eve again"]
    throttle.warning(log, "refusals of eve", "refused eve once more")  # nothing left untold
    assert said()[7:] == ["refused eve once more"]


def test_the_sources_it_remembers_are_bounded(said):
    clock = Clock()
    throttle = ThrottledLog(lines_per_window=1, window_s=60, sources_max=2, clock=clock)
    for source in ("a", "b", "a", "c"):  # c makes three: b, heard from least lately, goes
        throttle.warning(log, source, "from %s", source)
    throttle.warning(log, "b", "from b again")  # forgotten, so heard again
    throttle.warning(log, "c", "from c again")  # remembered: its line was used
    assert said() == ["from a", "from b",
                      "more than 1 warnings of a in 60 s: the next are counted, and their "
                      "number logged with the first one after that",
                      "from c", "from b again",
                      "more than 1 warnings of c in 60 s: the next are counted, and their "
                      "number logged with the first one after that"]


@pytest.fixture
def pool_log(caplog) -> Iterator[tuple[logging.Logger, Clock]]:
    """A library's logger with a throttle of two lines a minute as its filter, and its clock."""
    logger = logging.getLogger("pitboss.test.pool")
    caplog.set_level(logging.INFO, logger=logger.name)
    clock = Clock()
    throttle = ThrottledLog(lines_per_window=2, window_s=60, clock=clock)
    logger.addFilter(throttle)
    yield logger, clock
    logger.removeFilter(throttle)


def test_as_a_filter_a_librarys_warnings_are_throttled_by_message_and_its_infos_pass(
        pool_log, caplog):
    logger, clock = pool_log
    for n in range(5):  # one source: the message before its arguments
        logger.warning("error connecting in %r: %s", "pool-1", f"refused {n}")
    logger.warning("discarding broken connection: %s", "c1")  # another message
    logger.info("growing pool %r to %s", "pool-1", 2)  # not a warning: not counted
    clock.now += 60
    logger.warning("error connecting in %r: %s", "pool-1", "refused 5")
    source = f"{logger.name}'s \"error connecting in %r: %s\""
    assert [r.getMessage() for r in caplog.records] == [
        "error connecting in 'pool-1': refused 0", "error connecting in 'pool-1': refused 1",
        f"more than 2 warnings of {source} in 60 s: the next are counted, and their number "
        "logged with the first one after that",
        "discarding broken connection: c1", "growing pool 'pool-1' to 2",
        f"3 more warnings of {source} were not logged in the 60 s before this one; this one: "
        "error connecting in 'pool-1': refused 5"]


def test_as_a_filter_it_keeps_the_traceback_of_the_record_it_tells_a_count_with(
        pool_log, caplog):
    logger, clock = pool_log
    for _ in range(4):
        logger.warning("broken %s", "once")
    clock.now += 60
    try:
        raise ValueError("the cause")
    except ValueError:
        logger.exception("broken %s", "with 100% of its traceback")
    last = caplog.records[-1]
    assert last.getMessage() == (
        f"2 more warnings of {logger.name}'s \"broken %s\" were not logged in the 60 s "
        "before this one; this one: broken with 100% of its traceback")
    assert last.exc_info is not None
    assert str(last.exc_info[1]) == "the cause"
