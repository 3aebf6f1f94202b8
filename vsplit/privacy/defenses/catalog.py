"""The light list of defenses: every name, the module that defines it and the side that runs it, without importing
any implementation. :mod:`vsplit.privacy.defenses` checks config strings against it and re-exports it;
:mod:`vsplit.privacy.defenses.registry` checks that it agrees with what the implementations register.

Example:
    >>> CATALOG["nopeek"]
    ('nopeek', 'feature')
"""

#: Every defense and named setting: name -> (the module under vsplit.privacy.defenses that defines it, the side
#: that runs it: "label" for the label party, "feature" for each feature party).
CATALOG: dict[str, tuple[str, str]] = {
    "clip_noise": ("gradient_noise", "label"),
    "embedding_noise": ("embedding_noise", "feature"),
    "gap_noise": ("gap_noise", "label"),
    "label_dp": ("label_dp", "label"),
    "marvell": ("marvell", "label"),
    "max_norm": ("gradient_noise", "label"),
    "none": ("base", "label"),
    "nopeek": ("nopeek", "feature"),
    "secretflow_embedding_dp": ("registry", "feature"),
    "secretflow_label_dp": ("registry", "label"),
}
