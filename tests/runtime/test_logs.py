"""Log lines: a value from a payload (an eventId, a kind) never starts a line of its own."""

from __future__ import annotations

import json
import logging
import sys

from relay.runtime.logs import JsonFormatter, TextFormatter

FORGED = "ev-1\n12:00:00 INFO    relay.delivery: delivered everything  [eventId=ev-2]"


def record(msg: str = "accepted %s", *args: object, **extra: object) -> logging.LogRecord:
    rec = logging.LogRecord("relay.intake.webhook", logging.INFO, __file__, 1, msg, args, None)
    for name, value in extra.items():
        setattr(rec, name, value)
    return rec


def test_a_forged_newline_in_an_event_id_stays_on_its_line_escaped() -> None:
    line = TextFormatter().format(record("accepted", eventId=FORGED, kind="k\r\x1b[2Jcleared"))

    assert "\n" not in line and "\r" not in line and "\x1b" not in line
    assert 'eventId="ev-1\\n12:00:00 INFO    relay.delivery: delivered everything  [eventId=ev-2]"' in line
    assert 'kind="k\\r\\u001b[2Jcleared"' in line


def test_the_message_and_its_arguments_are_escaped_too() -> None:
    line = TextFormatter().format(record("replayed %s", "x\u2028forged\x85line"))

    assert line.endswith("replayed x\\u2028forged\\u0085line")
    assert len(line.splitlines()) == 1


def test_a_plain_value_is_written_as_it_is_and_one_with_spaces_quoted() -> None:
    line = TextFormatter().format(record("sent", eventId="ev-7", channel='ops "main" = x'))

    assert line.endswith('  [eventId=ev-7 channel="ops \\"main\\" = x"]')


def test_a_traceback_is_indented_under_its_line() -> None:
    try:
        raise ValueError("bad\n12:00:00 ERROR   relay: forged")
    except ValueError:
        rec = record("failed")
        rec.exc_info = sys.exc_info()
    lines = TextFormatter().format(rec).split("\n")

    assert lines[0].endswith("relay.intake.webhook: failed")
    assert len(lines) > 2 and all(line.startswith("    ") for line in lines[1:])
    assert lines[-2:] == ["    ValueError: bad", "    12:00:00 ERROR   relay: forged"]
    assert not any(line.startswith("12:00:00") for line in lines)


def test_json_lines_are_one_line_each_and_keep_the_value() -> None:
    line = JsonFormatter().format(record("accepted %s", "a\u2028b", eventId=FORGED, kind="k\x85"))

    assert len(line.splitlines()) == 1
    parsed = json.loads(line)
    assert parsed["eventId"] == FORGED and parsed["kind"] == "k\x85" and parsed["msg"] == "accepted a\u2028b"
