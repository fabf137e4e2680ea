"""ACE as the learner Combee accelerates: the per-sample chain (:mod:`.chain`) and the playbook
:class:`~combee_fast.protocols.Learner` (:mod:`.learner`)."""
