"""The paper in one place: Combee's four mechanisms (arXiv 2604.04247), one module each.

The paper presents its method as Map, Shuffle and Reduce stages plus a dynamic batch-size
controller; the modules follow that order. (Section numbers are not cited here: they could not
be checked against the paper's text from the development machine.)

1. :mod:`.map` -- **parallel map over a frozen snapshot**: n chains generate and
   reflect against one artifact version at once; nothing is applied until the step ends.
2. :mod:`.shuffle` -- **augmented shuffle**: each record duplicated p times,
   shuffled with a seeded RNG, cut into k = floor(sqrt(n)) groups (or more, with ``max_group``).
3. :mod:`.reduce` -- **parallel-scan reduce**: one proposer (curator) call per
   group against the same base, a reducer tree of fan-in <= ``max_fan_in`` over the proposals,
   split by topic past ``max_reduce_ops``; the merged edits are applied once.
4. :mod:`.controller` -- **dynamic batch size**: profile, fit T(bs) = A * bs^-alpha,
   pick bs* = (alpha * A / tau)^(1 / (alpha + 1)), re-planned live with a quality guard.
   Our extension, :mod:`.planner` (with :mod:`.latency_curve`): no trial batches; batch size
   and group shape re-planned every step from the endpoint's measured latency curve, the queue,
   prompt size, rewards, retention and the diversity of the step's lessons (``--batch-size auto``).

They are generic over *what is learned*: the learner-specific calls go through the
:class:`~combee_fast.protocols.Learner` protocol (ACE's playbook: :mod:`combee_fast.ace.learner`).
:mod:`combee_fast.methods.combee` composes them into one step, stage by stage.
"""
