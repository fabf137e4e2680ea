"""A package outside combee_fast that plugs into it (:mod:`.combee_notes`), and its tests."""
