"""ACE's four roles, as it declares them (:class:`~combee_fast.roles.spec.Role`).

- ``generator`` (serves the playbook): answers with the playbook in its prompt, citing bullets;
- ``reflector`` (proposes): diagnoses one attempt and tags the bullets it cited; the role a
  diversity remedy of the batch planner makes sample hotter;
- ``curator`` (proposes): turns reflections into playbook operations;
- ``reducer`` (proposes): merges the curators' operations proposed against one playbook.

The generator's, curator's and reducer's prompts hold the playbook: it is cut to fit their
endpoint's context.
"""

from __future__ import annotations

from combee_fast.ace.curator import CURATOR_MAX_TOKENS
from combee_fast.ace.generator import GENERATOR_MAX_TOKENS
from combee_fast.ace.reducer import REDUCER_MAX_TOKENS
from combee_fast.ace.reflector import REFLECTOR_MAX_TOKENS
from combee_fast.roles.spec import Role

GENERATOR = Role("generator", "serve", GENERATOR_MAX_TOKENS, fits_context=True,
                 prompts=("ace/prompts/generator.txt", "ace/prompts/generator_user.txt",
                          "ace/prompts/generator_retry.txt"))
REFLECTOR = Role("reflector", "propose", REFLECTOR_MAX_TOKENS, diverse=True,
                 prompts=("ace/prompts/reflector.txt", "ace/prompts/reflector_no_ground_truth.txt",
                          "ace/prompts/reflector_user.txt", "ace/prompts/reflector_ground_truth.txt"))
CURATOR = Role("curator", "propose", CURATOR_MAX_TOKENS, fits_context=True,
               prompts=("ace/prompts/curator.txt", "ace/prompts/curator_user.txt"))
REDUCER = Role("reducer", "propose", REDUCER_MAX_TOKENS, fits_context=True,
               prompts=("ace/prompts/reducer.txt", "ace/prompts/reducer_user.txt"))

ROLES = (GENERATOR, REFLECTOR, CURATOR, REDUCER)
"""ACE's roles, in call order."""
