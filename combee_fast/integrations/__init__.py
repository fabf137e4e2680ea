"""Combee inside other tools' optimizer slots, each importing its tool only when used.

- :mod:`.dspy`: :class:`~.dspy.CombeeOptimizer`, a DSPy ``Teleprompter``.
- :mod:`.mlflow`: :class:`~.mlflow.CombeePromptOptimizer` for ``mlflow.genai.optimize_prompts``,
  and :class:`~.mlflow.PromptAliases`, the release gate's decisions as prompt-registry aliases.
"""
