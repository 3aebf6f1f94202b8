"""The plain network that was the default before the default recipe (``vsplit.models.recipe.PLAIN``), for tests of
other features (plumbing, calibration, serving's numpy path) that need some small, fast model rather than the
recipe; tests of the default recipe itself use the defaults.

``PLAIN_SET``: the same as ``--set`` overrides of a party config, every key but ``train.epochs`` (a test's config
sets its own epochs; overrides win over the file, and later overrides over earlier ones).
"""

from __future__ import annotations

from vsplit.models.recipe import PLAIN, config_overrides

PLAIN_SET = config_overrides(PLAIN, skip=("epochs",))
