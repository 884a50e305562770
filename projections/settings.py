"""Settings and limits of the read side, read from the same environment as the ledger.

A setting is looked up in the mapping handed to the projections (the ledger's eventsourcing
environment) first, then in ``os.environ``, then its default: the order the eventsourcing
library uses, so one environment configures the ledger, the worker and the API alike.
"""

from __future__ import annotations

import os
import re
import struct
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from importlib import resources
from pathlib import Path
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

GAMING_DAY_TZ: Final = "PITBOSS_GAMING_DAY_TZ"
GAMING_DAY_START: Final = "PITBOSS_GAMING_DAY_START"
GAMING_DAY_TZ_DEFAULT: Final = "UTC"
GAMING_DAY_START_DEFAULT: Final = time(6, 0)
# The gaming days whose bounds fit the calendar in every time zone from any day start: the
# next day's start, at up to 12 hours west of UTC, must not fall after 9999-12-31.
DAY_MIN: Final = date(1, 1, 2)
DAY_MAX: Final = date(9999, 12, 29)
# The instants a round search takes: each gaming day's, in any zone (a time near year 1 or
# 9999 in a far zone lies outside the years Python can hold once taken to UTC).
MOMENT_MIN: Final = datetime.combine(DAY_MIN, time(), UTC)
MOMENT_MAX: Final = datetime.combine(DAY_MAX + timedelta(days=1), time(), UTC)
STATEMENT_TIMEOUT_MS: Final = "PITBOSS_QUERY_STATEMENT_TIMEOUT_MS"

# Batches: a page of notifications is read, applied and tracked in one transaction.
BATCH_SIZE_DEFAULT: Final = 1000
BATCH_SIZE_MAX: Final = 10_000
POLL_INTERVAL_MIN_S: Final = 0.01
POLL_INTERVAL_MAX_S: Final = 60.0
# Reads: page sizes, ranges and the time a query may take.
ROUNDS_PAGE_MAX: Final = 200
BALANCES_PAGE_MAX: Final = 500
HOUSE_PAGE_MAX: Final = 500
DAY_RANGE_MAX_DAYS: Final = 366
DAY_ROUNDS_PAGE_MAX: Final = 500
CASHIER_PAGE_MAX: Final = 500
CASHIERS_SHOWN_MAX: Final = 500  # a desk page's totals per cashier and currency
# A cursor is its list's name and the last row's key, as UTF-8 JSON, and a 16-byte tag, in
# base64. The longest key is a house account's: "house:" and a table name of up to 64
# characters (4 bytes each at most), then a UUID; about 336 bytes, 450 characters in base64.
CURSOR_MAX_CHARS: Final = 512
STATEMENT_TIMEOUT_MS_DEFAULT: Final = 5000
STATEMENT_TIMEOUT_MS_RANGE: Final = (100, 600_000)
# Lag is counted exactly up to this many events; beyond it, head minus position is reported
# (an upper bound: ids have gaps). The count runs in every read that reports a lag (a day's
# report, the cashier's desk, the positions: three counts), at about 0.2 ms a thousand events:
# 100,000 made each such page 20 to 50 ms slower while a view was far behind.
LAG_COUNT_MAX: Final = 10_000
# A day's figures are said read to its end (read_to_day_end) once the table/day view has read
# the log this long past it: an event stamped before the day's end may be stored later, by as
# long as an append may take (the ledger's statement timeout, 30 s by default) and as far as
# the servers' clocks differ.
DAY_END_SETTLE: Final = timedelta(seconds=60)
# The balance check, a part at a time: this many rows compared, or this many ids of the ledger's
# log scanned for account openings; one answer lists this many findings at most.
CHECK_SCAN_IDS: Final = 1_000_000
CHECK_PAGE_ROWS: Final = 500
CHECK_FINDINGS_MAX: Final = 1000
CHECK_BUDGET_S: Final = 5.0  # per request of the audit API, well inside gunicorn's timeout
# The projections' own connection pool, unless PROJECTIONS_POSTGRES_POOL_SIZE etc. say otherwise.
# Each connection is pinged before use, and on finding one dropped the pool pings every idle one
# (projections.engine): after the database restarts, a pool of stale connections would otherwise
# fail one request each (reads and batches; no decision waits on it).
POOL_DEFAULTS: Final = {"PROJECTIONS_POSTGRES_POOL_SIZE": "2",
                        "PROJECTIONS_POSTGRES_MAX_OVERFLOW": "4",
                        "PROJECTIONS_POSTGRES_PRE_PING": "y"}

_START_PATTERN = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")


class ProjectionSetupError(Exception):
    """The read side cannot run as configured; the message says which setting to change."""


def setting(env: Mapping[str, str], key: str, default: str) -> str:
    value = env.get(key)
    if value is None:
        value = os.environ.get(key)
    return default if value is None or not value.strip() else value.strip()


def check_batch_size(batch_size: int) -> None:
    if type(batch_size) is not int or not 1 <= batch_size <= BATCH_SIZE_MAX:
        raise ValueError(f"batch_size must be a whole number from 1 to {BATCH_SIZE_MAX}")


def statement_timeout_ms(env: Mapping[str, str]) -> int:
    raw = setting(env, STATEMENT_TIMEOUT_MS, str(STATEMENT_TIMEOUT_MS_DEFAULT))
    low, high = STATEMENT_TIMEOUT_MS_RANGE
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise ProjectionSetupError(f"{STATEMENT_TIMEOUT_MS}={raw!r} is not a whole number of "
                                   f"milliseconds from {low} to {high}")
    return int(raw)


@dataclass(frozen=True)
class GamingDay:
    """A casino's accounting day: it starts at ``start`` (wall-clock time) in ``tz``.

    An instant belongs to the gaming day whose start it follows: with a 06:00 start, 05:59
    local time on the 2nd is still the gaming day of the 1st. Wall-clock arithmetic keeps this
    right across daylight-saving changes (a gaming day may then last 23 or 25 hours).
    """

    tz_name: str = GAMING_DAY_TZ_DEFAULT
    start: time = GAMING_DAY_START_DEFAULT

    def __post_init__(self) -> None:
        try:
            ZoneInfo(self.tz_name)
        except (ZoneInfoNotFoundError, ValueError):
            raise ProjectionSetupError(f"{GAMING_DAY_TZ}={self.tz_name!r} is not an IANA time "
                                       "zone such as UTC or Europe/Monaco") from None

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.tz_name)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> GamingDay:
        tz_name = setting(env, GAMING_DAY_TZ, GAMING_DAY_TZ_DEFAULT)
        raw = setting(env, GAMING_DAY_START, f"{GAMING_DAY_START_DEFAULT:%H:%M}")
        match = _START_PATTERN.match(raw)
        if match is None:
            raise ProjectionSetupError(f"{GAMING_DAY_START}={raw!r} is not a time of day "
                                       "written HH:MM, such as 06:00")
        return cls(tz_name, time(int(match[1]), int(match[2])))

    def day_of(self, at: datetime) -> date:
        if at.tzinfo is None:
            raise ValueError("a gaming day needs an aware time")
        # The day whose bounds hold it, as bounds() gives them: with a start inside the hour
        # a clock change skips or repeats, the local date or the day before may not be it.
        day = at.astimezone(self.tz).date()
        while at < self.bounds(day)[0]:
            day -= timedelta(days=1)
        while at >= self.bounds(day)[1]:
            day += timedelta(days=1)
        return day

    def bounds(self, day: date) -> tuple[datetime, datetime]:
        """The UTC instants at which ``day`` begins and the next gaming day begins."""
        tz = self.tz
        begin = datetime.combine(day, self.start, tzinfo=tz).astimezone(UTC)
        end = datetime.combine(day + timedelta(days=1), self.start, tzinfo=tz).astimezone(UTC)
        return begin, end

    def describe(self) -> str:
        return f"{self.start:%H:%M} {self.tz_name}"

    def counts_as(self, other: GamingDay) -> bool:
        """Whether the two count the same days: the same start, and zones that have kept one
        clock since 1970 count as one (``UTC``, ``Etc/UTC`` and ``GMT``; ``US/Eastern`` and
        ``America/New_York``; ``Europe/Dublin`` and ``Europe/London``)."""
        if self.start != other.start:
            return False
        if self.tz_name == other.tz_name:
            return True
        rules = _zone_clock(self.tz_name)
        return rules is not None and rules == _zone_clock(other.tz_name)


def _zone_clock(name: str) -> tuple[object, ...] | None:
    """What the compiled rules of time zone ``name`` (where ``zoneinfo`` finds them) say of its
    clock from 1970 on, the years a ledger can hold: the offset then, each change of it, and
    the rule for the years after them; not the abbreviations, which differ between zones that
    keep one time (``UTC`` and ``GMT``), nor their clocks before (Monaco kept Paris time from
    1945). None where they cannot be read."""
    data = None
    for root in zoneinfo.TZPATH:
        path = Path(root, name)
        if path.is_file():
            data = path.read_bytes()
            break
    else:
        try:
            data = resources.files("tzdata.zoneinfo").joinpath(*name.split("/")).read_bytes()
        except (ImportError, OSError):
            return None
    try:
        return _tzif_clock(data)
    except (ValueError, IndexError, struct.error):
        return None


def _tzif_clock(data: bytes) -> tuple[object, ...]:
    """RFC 8536: the version-1 block is passed over for the 64-bit one after it (its transition
    times 8 bytes each, leap seconds 12), whose types are read without their abbreviation."""
    def counts(at: int) -> tuple[int, int, int, int, int, int]:
        if data[at:at + 4] != b"TZif":
            raise ValueError("not a TZif file")
        isut, isstd, leap, time, types, chars = struct.unpack(">6l", data[at + 20:at + 44])
        return isut, isstd, leap, time, types, chars

    def size(found: tuple[int, int, int, int, int, int], width: int) -> int:
        isut, isstd, leap, time, types, chars = found
        return time * (width + 1) + types * 6 + chars + leap * (width + 4) + isstd + isut

    found, at, width = counts(0), 44, 4
    if data[4:5] != b"\0":  # version 2 or later: the 64-bit block, then the rule
        second = 44 + size(found, 4)
        found, at, width = counts(second), second + 44, 8
    time, types = found[3], found[4]
    times = struct.unpack(f">{time}{'q' if width == 8 else 'l'}", data[at:at + time * width])
    kinds = data[at + time * width:at + time * (width + 1)]
    infos = data[at + time * (width + 1):at + time * (width + 1) + types * 6]
    # The offset alone (Dublin flags its winter time as daylight, London its summer time) ...
    offsets = [struct.unpack(">l", infos[i:i + 4])[0] for i in range(0, len(infos), 6)]
    before = [offsets[k] for t, k in zip(times, kinds, strict=True) if t < 0]
    clock = before[-1] if before else offsets[0]
    since: list[tuple[int, int]] = []
    for t, k in zip(times, kinds, strict=True):
        if t >= 0 and offsets[k] != (since[-1][1] if since else clock):  # ... that changes
            since.append((t, offsets[k]))
    # The rule for the years after the last transition, where it matters: a file with
    # transitions to 2037 says them, and two zones may write one rule two ways.
    last = since[-1][0] if since else 0
    after = data[at + size(found, width):].strip() if width == 8 and last < _YEAR_2037 else b""
    return clock, tuple(since), re.sub(rb"<[^>]*>|[A-Za-z]{3,}", b"N", after)


_YEAR_2037 = 2114380800  # 2037-01-01T00:00:00Z, as far as a 32-bit time goes in whole years
