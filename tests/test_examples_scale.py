"""``ACTORMEM_TEST_PROFILE`` and ``ACTORMEM_EXAMPLES_SCALE``: how the random tests' example
counts are chosen (the suite's ``ci`` profile, the ``thorough`` one, the ASan run's scale)."""

from __future__ import annotations

import pytest

from . import strategies


@pytest.mark.parametrize(
    ("raw", "scale"), [("1", 1.0), ("0.5", 0.5), ("4", 4.0), ("100", 100.0)]
)
def test_scale_is_read(raw: str, scale: float, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTORMEM_EXAMPLES_SCALE", raw)
    assert strategies._examples_scale() == scale


def test_unset_is_the_profiles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACTORMEM_EXAMPLES_SCALE", raising=False)
    monkeypatch.delenv("ACTORMEM_TEST_PROFILE", raising=False)
    assert strategies._profile() == "ci"
    assert strategies._examples_scale() == strategies.PROFILE_SCALES["ci"] < 1
    monkeypatch.setenv("ACTORMEM_TEST_PROFILE", "")
    assert strategies._examples_scale() == strategies.PROFILE_SCALES["ci"]
    monkeypatch.setenv("ACTORMEM_TEST_PROFILE", "thorough")
    assert strategies._profile() == "thorough"
    assert strategies._examples_scale() == 1.0
    # The explicit scale wins over the profile's.
    monkeypatch.setenv("ACTORMEM_EXAMPLES_SCALE", "0.25")
    assert strategies._examples_scale() == 0.25


@pytest.mark.parametrize("raw", ["quick", "CI", "full", " ci"])
def test_bad_profile_is_refused(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTORMEM_TEST_PROFILE", raw)
    with pytest.raises(ValueError, match="ACTORMEM_TEST_PROFILE"):
        strategies._profile()


@pytest.mark.parametrize("raw", ["", "abc", "0", "-1", "nan", "inf", "101"])
def test_bad_scale_is_refused(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTORMEM_EXAMPLES_SCALE", raw)
    with pytest.raises(ValueError, match="ACTORMEM_EXAMPLES_SCALE"):
        strategies._examples_scale()


def test_counts_scale_and_never_reach_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(strategies, "EXAMPLES_SCALE", 0.5)
    assert [strategies.examples(n) for n in (1, 2, 3, 60, 500)] == [1, 1, 2, 30, 250]
    monkeypatch.setattr(strategies, "EXAMPLES_SCALE", 0.01)
    assert strategies.examples(60) == 1
