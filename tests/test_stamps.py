"""core/stamps.py: one stamp format, a parser that agrees with datetime, one duration format."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from resumable.core.stamps import format_duration, parse_stamp, stamp


@given(st.datetimes(min_value=datetime(1000, 1, 1), max_value=datetime(9999, 12, 31),
                    timezones=st.just(UTC)))
def test_parse_agrees_with_datetime(moment: datetime) -> None:
    for text in (moment.strftime("%Y-%m-%dT%H:%M:%SZ"), moment.isoformat(), moment.strftime("%Y-%m-%dT%H:%M:%S"),
                 moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"):
        expected = datetime.fromisoformat(text.replace("Z", "+00:00")).replace(
            tzinfo=datetime.fromisoformat(text.replace("Z", "+00:00")).tzinfo or UTC).timestamp()
        got = parse_stamp(text)
        assert got is not None and abs(got - expected) < 1e-6, text


def test_offsets_and_rejections() -> None:
    assert parse_stamp("2026-11-29T10:00:00+02:00") == parse_stamp("2026-11-29T08:00:00Z")
    for bad in ("", "2026-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-11-29", "2026-11-29T08:00:00Zjunk",
                "２０２６-11-29T08:00:00Z", None, 5, "2026-11-29T24:00:00Z"):
        assert parse_stamp(bad) is None, bad
    assert parse_stamp("2024-02-29T00:00:00Z") is not None


def test_stamp_round_trips_with_milliseconds() -> None:
    t = 1764403200.125
    assert stamp(t) == "2025-11-29T08:00:00Z"
    assert stamp(t, ms=True) == "2025-11-29T08:00:00.125Z"
    assert parse_stamp(stamp(t, ms=True)) == t
    now = datetime.now(UTC)
    assert abs(parse_stamp(stamp()) - now.timestamp()) < 2  # type: ignore[operator]
    assert format_duration(0.8) == "0.8s" and format_duration(65) == "1m 05s"
    assert format_duration(timedelta(hours=50).total_seconds()) == "2d 2h" and format_duration(-1) == "?"
