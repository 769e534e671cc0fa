"""The model of the whole decision solved by CP-SAT: the dynamic programme's decision, proven.

The tests every backend passes are in ``backend_cases.py``.
"""

from __future__ import annotations

import pytest

from tests.preemption.backend_cases import (  # noqa: F401 (collected here, for this backend)
    test_matches_dp_and_brute_force_on_small_states,
    test_matches_dp_on_a_wide_sweep,
    test_matches_dp_on_generator_states,
    test_options_do_not_change_the_decision,
    test_solves_a_state_the_dynamic_programme_refuses,
    test_time_limited_runs_are_legal_and_bounded,
)


@pytest.fixture
def method() -> str:
    return "cpsat"
