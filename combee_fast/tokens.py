"""One token estimate for the whole project (playbook budget, simulated server, prompts).

Real tokenizers differ per model; a budget needs a stable, fast, model-free count. Four
characters a token is the usual rule of thumb for English BPE vocabularies.
"""

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """Tokens in ``text``: ``ceil(len(text) / 4)``; 0 for the empty string."""
    return -(-len(text) // CHARS_PER_TOKEN)
