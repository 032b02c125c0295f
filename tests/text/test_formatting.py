"""One printing rule for every report section and terminal table."""

import math

import numpy as np

from ragvet.text.formatting import DASH, fmt, is_missing


def test_missing_values_print_as_a_dash():
    assert [is_missing(v) for v in (None, math.nan, math.inf, 0.0, 0)] == [True, True, True, False, False]
    assert fmt(None) == fmt(math.nan) == fmt(-math.inf) == DASH == "–"


def test_three_decimals_plain_ints_and_no_negative_zero():
    assert fmt(0.68095) == "0.681"
    assert fmt(2640) == "2640" and fmt(np.int64(13)) == "13"
    assert fmt(0.1234, signed=True) == "+0.123" and fmt(-0.1146, signed=True) == "-0.115"
    assert fmt(-0.0004) == "0.000" and fmt(-0.0004, signed=True) == "0.000" and fmt(0.0001, signed=True) == "0.000"
