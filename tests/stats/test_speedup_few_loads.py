"""stats.speedup.few_loads_words: a verdict from fewer than FEW_LOADS loads says so beside its interval."""
from __future__ import annotations

from trtprof.stats.speedup import FEW_LOADS, few_loads_words


def test_two_loads_say_what_they_mean_for_the_interval_and_three_say_nothing():
    assert FEW_LOADS == 3
    assert few_loads_words(2) == ("only 2 loads: 1 degree of freedom behind this interval, too few to trust its "
                                  "width (3+ loads needed)")
    assert few_loads_words(1).startswith("only 1 load: 0 degrees of freedom")
    assert few_loads_words(3) == "" and few_loads_words(6) == ""
