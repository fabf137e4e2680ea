"""The import path plug-in learners written before the split use for
:class:`~combee_fast.protocols.learning.LearnContext`, which lives beside its protocol now: a
plug-in's kind (``tests/plugins/combee_notes``) imports it from here."""

from combee_fast.protocols.learning import LearnContext

__all__ = ["LearnContext"]
