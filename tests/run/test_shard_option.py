"""--shard ARM:N: parsed against the experiment's arms and repeats (exit 2 otherwise)."""

from __future__ import annotations

import pytest

from servelab.errors import InputError
from servelab.run.options import parse_shard


def test_shard_is_an_arm_and_a_repeat_of_the_experiment() -> None:
    arms = ["control", "treatment"]
    assert parse_shard("treatment:2", arms, 3) == ("treatment", 2)
    assert parse_shard("control:1", arms, 1) == ("control", 1)
    for bad in ("treatment", "treatment:0", "treatment:4", "other:1", "treatment:x",
                "treatment:١", ":1", "treatment:2:3"):
        with pytest.raises(InputError) as e:
            parse_shard(bad, arms, 3)
        assert e.value.exit_code == 2 and "ARM" in (e.value.hint or "")
