"""Claims that survive (issue 9): the experiment card (:mod:`.card`), runs made under a card
(:mod:`.discipline`) and the ``combee plan`` command (:mod:`.cli`)."""
