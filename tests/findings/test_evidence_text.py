"""The one formatter of evidence values: 4 significant digits, records and lists compact, never cut."""

import math

from alignprobe.findings.evidence_text import evidence_value


def test_numbers_at_4_significant_digits_and_words_as_written():
    assert evidence_value(0.123456789012345) == "0.1235"
    assert evidence_value(123456.789) == "1.235e+05"
    assert evidence_value(math.nan) == "nan" and evidence_value("inf") == "inf"
    assert evidence_value(True) == "true" and evidence_value(None) == "null" and evidence_value(7) == "7"


def test_records_and_lists_are_compact_and_whole():
    value = {"offset": 1, "scale": {"mean": 0.123456789012345}, "factors": [0.987654321] * 50}
    text = evidence_value(value)
    assert text.startswith('{"offset": 1, "scale": {"mean": 0.1235}, "factors": [0.9877, ')
    assert text.count("0.9877") == 50 and "..." not in text
