"""What a turn is indexed as: its date in English, whatever the host's locale."""

from __future__ import annotations

import locale
from datetime import UTC, datetime

import pytest

from memstream.projections.turns import turn_unit, unit_date

MAY_8 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def _a_non_english_time_locale() -> str | None:
    for name in ("de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8", "es_ES.UTF-8", "ru_RU.UTF-8"):
        try:
            locale.setlocale(locale.LC_TIME, name)
        except locale.Error:
            continue
        locale.setlocale(locale.LC_TIME, "C")
        return name
    return None


@pytest.fixture
def c_time_locale():
    saved = locale.setlocale(locale.LC_TIME)
    locale.setlocale(locale.LC_TIME, "C")
    yield
    locale.setlocale(locale.LC_TIME, saved)


def test_the_unit_date_is_the_english_date_it_always_was(c_time_locale):
    assert unit_date(MAY_8) == "[8 May 2023]"
    for month in range(1, 13):  # every month as the C locale's %B names it
        when = datetime(2024, month, 28)
        assert unit_date(when) == f"[28 {when:%B} 2024]"
    assert turn_unit(MAY_8, "User: hi", "") == "[8 May 2023] User: hi"


def test_the_unit_date_ignores_a_non_english_time_locale(c_time_locale):
    name = _a_non_english_time_locale()
    if name is None:
        pytest.skip("no non-English locale installed here (`locale -a`); the next test covers it")
    locale.setlocale(locale.LC_TIME, name)
    assert f"{MAY_8:%B}" != "May"  # the host's formatting really is localised
    assert unit_date(MAY_8) == "[8 May 2023]"
    assert unit_date(datetime(2023, 3, 1)) == "[1 March 2023]"


def test_the_unit_date_never_asks_the_date_to_format_its_month_name():
    class Localised(datetime):  # formats as a German host would
        def __format__(self, spec):
            return super().__format__(spec.replace("%B", "Mai"))

        def strftime(self, spec):
            return super().strftime(spec.replace("%B", "Mai"))

    assert unit_date(Localised(2023, 5, 8)) == "[8 May 2023]"
