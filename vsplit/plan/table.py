"""The plan as a text table, the sentence that recommends a cut, and the one-line flags of each row.

Example:
    >>> human(1536), human(2.5e9), human(12)
    ('1.5k', '2.5G', '12')
"""

from __future__ import annotations

from vsplit.plan.plan import CutPlan, CutRow


def human(value: float) -> str:
    """A count in k (10^3), M, G."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.1f}{unit}"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.3g}"


def flags(row: CutRow) -> str:
    """R: the raw input crosses; S: a parameter is shared across the cut; D: dominated by an earlier cut."""
    return "".join(f for f, on in (("R", row.raw_input_crosses), ("S", row.shared_parameters), ("D", row.dominated))
                   if on)


def render(plan: CutPlan) -> str:
    """The table printed by ``vsplit plan`` (figures per sample; epoch seconds when a link was given)."""
    header = ["after", "tensors", "values", "bytes fwd", "bytes back", "client params", "client FLOPs",
              "client saved", "server FLOPs", "dCor"]
    if plan.link is not None:
        header.append("s/epoch")
    header.append("flags")
    lines = [header]
    for row in plan.rows:
        cells = [row.after, str(len(row.tensors)), human(row.values_forward), human(row.bytes_forward),
                 human(row.bytes_backward), human(row.client_params), human(row.client_flops),
                 human(row.client_saved_bytes), human(row.server_flops),
                 "-" if row.distance_correlation is None else f"{row.distance_correlation:.3f}"]
        if plan.link is not None:
            cells.append(f"{row.epoch_seconds:.1f}")
        cells.append(flags(row))
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths, strict=True)))
            for line in lines]
    text.insert(1, "-" * len(text[0]))
    return "\n".join(text)


def describe(row: CutRow | None, label: str) -> str:
    """One sentence about a recommended cut."""
    if row is None:
        return f"{label}: no cut fits"
    crossing = ", ".join(f"{t.producer} {tuple(t.shape[1:] if t.batched else t.shape)}" for t in row.tensors)
    return (f"{label}: after {row.after!r}: {human(row.bytes_forward)}B forward + {human(row.bytes_backward)}B back "
            f"per sample (shapes per sample), client {human(row.client_params)} params / "
            f"{human(row.client_flops)} FLOPs; "
            f"crossing: {crossing}")
