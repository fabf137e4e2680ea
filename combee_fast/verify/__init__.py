"""Claims that survive (issue 9): the experiment card (:mod:`.card`), runs made under a card
(:mod:`.discipline`), one cell of a verification (:mod:`.cells`) and the cached serial baseline
(:mod:`.baseline`), the verdict (:mod:`.verdict`) of ``combee verify`` (:mod:`.verification`),
``combee diagnose`` (:mod:`.diagnose`), the card's budget as a stop rule (:mod:`.budget`), role
separation (:mod:`.roles`), reports with plots (:mod:`.plots`, :mod:`.report`) and the
``plan``/``verify``/``diagnose`` commands (:mod:`.cli`)."""
