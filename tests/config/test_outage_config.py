"""`outage:` of a channel: the defaults, `off`, bad values named by key."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from relay.config import ChannelConfig


def test_outage_defaults_and_off() -> None:
    default = ChannelConfig(url="json://x").outage
    assert default is not None and (default.after, default.probe) == (5, 30.0)
    assert ChannelConfig.model_validate({"url": "json://x", "outage": False}).outage is None  # YAML's bare off
    assert ChannelConfig.model_validate({"url": "json://x", "outage": "off"}).outage is None
    mine = ChannelConfig.model_validate({"url": "json://x", "outage": {"after": 3, "probe": "1m"}}).outage
    assert mine is not None and (mine.after, mine.probe) == (3, 60.0)


@pytest.mark.parametrize("bad", [{"after": 0}, {"probe": "0s"}, {"probe": "1h"}, {"every": 3}, "sometimes"])
def test_bad_outage_settings_are_refused_by_key(bad: object) -> None:
    with pytest.raises(ValidationError) as caught:
        ChannelConfig.model_validate({"url": "json://x", "outage": bad})
    assert "outage" in str(caught.value)
