"""The `time_intervals` section: Alertmanager's shape, validated value by value so that an error names its
key path (`time_intervals[0].time_intervals[1].times[0].end_time`) and the value (relay.config.time_intervals)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from relay.config.base import ConfigModel
from relay.config.time_intervals import (
    Interval,
    parse_days_of_month,
    parse_location,
    parse_months,
    parse_period,
    parse_time,
    parse_time_range,
    parse_weekdays,
    parse_years,
)

_SEXAGESIMAL = " (YAML reads an unquoted range like 1:5 as a number: quote it)"


def _checked(parse: Any, ranges: bool = False) -> Any:
    """Keeps the value as written once `parse` accepts it; `ranges`: a number YAML made of a range says so."""

    def check(value: Any) -> Any:
        try:
            parse(value)
        except ValueError as exc:
            if ranges and isinstance(value, int) and value > 59:
                raise ValueError(f"{exc}{_SEXAGESIMAL}") from None
            raise
        return value

    return AfterValidator(check)


def _clock(value: Any) -> Any:
    # YAML 1.1 reads an unquoted 18:00 as the number 1080 (base 60): read it back as the time it was.
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return f"{value // 60:02d}:{value % 60:02d}"
    return value


ClockTime = Annotated[str, BeforeValidator(_clock)]


class TimeRangeConfig(ConfigModel):
    start_time: Annotated[ClockTime, _checked(parse_time)]
    end_time: Annotated[ClockTime, _checked(lambda v: parse_time(v, end=True))]

    @model_validator(mode="after")
    def _ordered(self) -> TimeRangeConfig:
        parse_time_range(self.start_time, self.end_time)
        return self


class TimePeriodConfig(ConfigModel):
    """One entry of an interval's `time_intervals`, in Alertmanager's shape (relay.config.time_intervals)."""

    times: list[TimeRangeConfig] = Field(default_factory=list)
    weekdays: list[Annotated[str, _checked(parse_weekdays)]] = Field(default_factory=list)
    days_of_month: list[Annotated[int | str, _checked(parse_days_of_month, ranges=True)]] = Field(default_factory=list)
    months: list[Annotated[int | str, _checked(parse_months, ranges=True)]] = Field(default_factory=list)
    years: list[Annotated[int | str, _checked(parse_years)]] = Field(default_factory=list)
    location: Annotated[str | None, _checked(parse_location)] = None


class TimeIntervalConfig(ConfigModel):
    name: str = Field(min_length=1, max_length=100)
    time_intervals: list[TimePeriodConfig] = Field(default_factory=list)

    def compiled(self) -> Interval:
        return Interval(self.name, tuple(parse_period(p.model_dump()) for p in self.time_intervals))
