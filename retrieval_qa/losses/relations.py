"""The names of GAM's four relations (:mod:`.gam`), without torch: what an analysis that
only labels them imports (``experiments/endx_analyses.py --dry-run`` imports no torch)."""

from __future__ import annotations

#: The four relations of eq. 12, ``"x|y"`` = p(x_j | y_i), under their config names (YAML
#: keys and command-line overrides cannot hold a ``|``): the one definition of the relation
#: names, e.g. ``model.gam.final.qq`` of conf/model/endx.yaml is the weight of ``q|q``.
RELATION_NAMES: dict[str, str] = {"qq": "q|q", "aa": "a|a", "aq": "a|q", "qa": "q|a"}
