"""The cut-layer planner: where to split any PyTorch model, what crosses the cut, and what it costs.

``plan_cuts(model, example_inputs)`` captures the model's dataflow once (``torch.export`` on a deep copy, or one
recorded forward pass when export refuses) and returns a :class:`~vsplit.plan.plan.CutPlan` with one row per
candidate cut: the tensors that cross (skips included), bytes each way, parameters, FLOPs and saved activations on
each side, a privacy proxy and, over a :class:`~vsplit.plan.costs.Link`, seconds per epoch. ``plan.split(name)``
carries the cut out. ``vsplit plan`` is the command line; ``docs/choosing_a_cut.md`` the guide.

Importing this package does not import PyTorch; the names below load on first use.

Example:
    >>> from vsplit import plan
    >>> sorted(plan.__all__)
    ['CutPlan', 'CutRow', 'Link', 'plan_cuts']
"""

from typing import TYPE_CHECKING

from vsplit.lazy import lazy_attributes

_LAZY = {
    "CutPlan": "vsplit.plan.plan:CutPlan",
    "CutRow": "vsplit.plan.plan:CutRow",
    "Link": "vsplit.plan.costs:Link",
    "plan_cuts": "vsplit.plan.plan:plan_cuts",
}
__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
__all__ = ["CutPlan", "CutRow", "Link", "plan_cuts"]

if TYPE_CHECKING:
    from vsplit.plan.costs import Link
    from vsplit.plan.plan import CutPlan, CutRow, plan_cuts
