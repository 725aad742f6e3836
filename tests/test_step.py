"""A plan step validates its fields: every invalid step is refused with the same
error whether or not a valid step of the same kind and buffers was made before
(steps of the same shape are validated once, then only their blocks and peer)."""

import pytest

from wacoll import PlanError
from wacoll.plans.plan import Step

VALID = [
    (("send", (0, 2)), {"peer": 1, "src": "in"}),
    (("recv", (3,)), {"peer": 0, "dst": "out"}),
    (("recv_combine", (1,)), {"peer": 2, "dst": "acc", "side": "left", "group": 3}),
    (("copy", (0,)), {"src": "in", "dst": "out"}),
    (("combine", ()), {"src": "tmp", "dst": "out", "side": "right"}),
]

INVALID = [
    (("send", (True,)), {"peer": 1, "src": "in"}, "invalid block id True"),
    (("send", (-1,)), {"peer": 1, "src": "in"}, "invalid block id -1"),
    (("send", (1.0,)), {"peer": 1, "src": "in"}, "invalid block id 1.0"),
    (("send", (0,)), {"peer": True, "src": "in"}, "peer must be an integer rank"),
    (("send", (0,)), {"peer": 1.0, "src": "in"}, "peer must be an integer rank"),
    (("send", (0,)), {"src": "in"}, "needs peer"),
    (("copy", (0,)), {"peer": 1, "src": "in", "dst": "out"}, "takes no peer"),
    (("send", (0,)), {"peer": 1, "src": "In"}, "needs a buffer name for src"),
    (("recv", (0,)), {"peer": 1, "dst": "out", "side": "left"}, "takes no side"),
    (("recv_combine", (0,)), {"peer": 1, "dst": "out", "side": "up"}, "side must be"),
    (("recv", (0,)), {"peer": 1, "dst": "out", "group": 2}, "only recv_combine"),
    (("bogus", 5), {}, "unknown step kind"),
    (("send", (0,)), {"peer": 1, "src": ["in"]}, "needs a buffer name for src"),
]


@pytest.mark.parametrize("made_valid_first", [False, True])
def test_invalid_steps_are_refused_the_same_way(made_valid_first):
    if made_valid_first:
        for args, kwargs in VALID:
            Step(*args, **kwargs)
    for args, kwargs, message in INVALID:
        with pytest.raises(PlanError, match=message):
            Step(*args, **kwargs)


def test_valid_steps_keep_their_fields():
    for _ in range(2):  # (the second time through the validated shapes)
        for args, kwargs in VALID:
            step = Step(*args, **kwargs)
            assert (step.kind, step.blocks) == args
            assert all(getattr(step, k) == v for k, v in kwargs.items())
    assert Step("send", [4, 5], peer=1, src="in").blocks == (4, 5)
