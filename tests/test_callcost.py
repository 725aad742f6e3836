"""What a call costs besides its messages (wacoll.plans.callcost): fitted from
samples, written and read back strictly, and bad values refused with errors that
name them."""

import json
import math

import pytest

from wacoll import PlanError, Topology
from wacoll.plans import build
from wacoll.plans.callcost import (
    CallCosts,
    as_json,
    critical_messages,
    fit_call_costs,
    read_call_costs,
)


def test_a_fit_recovers_a_line_per_kind():
    samples = [("plan", m, 2e-6 + m * 0.5e-6) for m in (1, 2, 4, 8)]
    samples += [("library", 1, 3e-6), ("library", 1, 3.2e-6), ("library", 1, 2.8e-6)]
    costs = fit_call_costs(samples)
    assert costs.plan_call == pytest.approx(2e-6)
    assert costs.plan_message == pytest.approx(0.5e-6)
    assert costs.library_call == pytest.approx(3e-6) and costs.library_message == 0


@pytest.mark.parametrize(
    "samples, named",
    [
        ([("plan", 1, 1e-6)], "no samples of the library kind"),
        (
            [("plan", 1, 1e-6), ("library", 1, 1e-6), ("gpu", 1, 1e-6)],
            "unknown kind 'gpu'",
        ),
    ],
)
def test_bad_samples_are_refused(samples, named):
    with pytest.raises(PlanError, match=named):
        fit_call_costs(samples)


@pytest.mark.parametrize("value", [-1e-6, math.nan, math.inf, True, "1e-6"])
def test_bad_costs_are_refused(value):
    with pytest.raises(PlanError, match="plan_call must be a number of seconds"):
        CallCosts(
            plan_call=value, plan_message=0.0, library_call=0.0, library_message=0.0
        )


def test_a_written_fit_reads_back(tmp_path):
    costs = CallCosts(2e-6, 1e-7, 3e-6, 0.0)
    path = tmp_path / "callcost.json"
    path.write_text(as_json(costs, command="test"))
    assert read_call_costs(path) == costs


@pytest.mark.parametrize(
    "text, named",
    [
        (None, "no such file"),
        ("{not json", "is not JSON"),
        (json.dumps({"costs": {"plan_call": 1e-6}}), "must hold"),
        (
            json.dumps(
                {
                    "costs": {
                        "plan_call": -1,
                        "plan_message": 0,
                        "library_call": 0,
                        "library_message": 0,
                    }
                }
            ),
            "plan_call must be a number",
        ),
        ('{"costs": {}, "costs": {}}', "given twice"),
    ],
)
def test_a_bad_file_raises_an_error_naming_it(tmp_path, text, named):
    path = tmp_path / "callcost.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(PlanError, match=named):
        read_call_costs(path)


def test_critical_messages_count_the_longest_chain_of_sends():
    flat = build("bcast", Topology.from_sizes([8]), "tree", tree="flat", count=1)
    binomial = build("bcast", Topology.from_sizes([8]), "mpich", count=1)
    assert critical_messages(flat) == 7.0  # the root sends one after another
    assert critical_messages(binomial) == 3.0
