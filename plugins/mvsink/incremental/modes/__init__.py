"""The refresh modes, each a strategy behind one interface (:mod:`.base`), tried in the order of
:data:`mvsink.incremental.modes.registry.REFRESH_MODES`: linear (:mod:`.linear`), aggregate state (:mod:`.aggregate`),
affected groups (:mod:`.groups`), top-k (:mod:`.topk`); the full diff (:mod:`.full`) when none runs."""
