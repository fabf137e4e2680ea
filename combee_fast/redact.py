"""Keeping secrets out of files and the terminal, and user text from driving the terminal.

- :func:`strip_userinfo`: a URL without ``user:password@`` (what files, ledgers and messages show;
  the request itself still uses the full URL).
- :func:`scrub`: text from a server (an error body) or an exception without the API key's value,
  the values of ``Authorization``-like headers, bearer tokens and URL credentials. A secret is
  found in every encoding a server may echo it in: as it is, percent-encoded (either case, UTF-8)
  or percent-decoded, JSON-escaped (``\\/``, ``\\u002f``, ``\\"``; each character in any of
  these forms, mixed), and base64 (standard or URL-safe, the ``user:password`` of HTTP Basic
  included when given as a secret).
- :func:`escape_control`: control and format characters (Unicode categories Cc and Cf: ESC, BEL,
  CR, ..., zero-width and bidi overrides such as U+202E) written as ``\\xNN``/``\\uNNNN``, so
  text from a data file or a server cannot change the terminal title, clear the screen or reorder
  what an error line shows.
"""

from __future__ import annotations

import base64
import functools
import re
import unicodedata
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit, urlunsplit

REDACTED = "[redacted]"

_HEADER_VALUE = re.compile(
    r"""(?ix)
    \b((?:proxy-)?authorization|x-api-key|api[-_]key|cookie|set-cookie|x-auth-token)   # the name
    (["']?\s*[:=]\s*["']?)                                                             # : or = and quotes
    ([^"'\r\n,;}]+)                                                                    # the value
    """
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}")
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@")
_MIN_SECRET = 4  # shorter "secrets" would redact ordinary words


def strip_userinfo(url: str) -> str:
    """``url`` without its ``user:password@`` part (unchanged when it has none or is not a URL)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return _URL_USERINFO.sub(r"\1", url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every secret value (in each of its encodings: module docstring), header
    credential, bearer token and URL userinfo replaced by :data:`REDACTED` (URL userinfo is dropped)."""
    pattern = _secrets_pattern(tuple(secrets))
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    text = _HEADER_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    return _URL_USERINFO.sub(r"\1", text)


@functools.lru_cache(maxsize=64)
def _secrets_pattern(secrets: tuple[str, ...]) -> re.Pattern[str] | None:
    """One pattern matching every secret of ``secrets`` in every encoding, longest first."""
    values = {unquote(secret) for secret in secrets if secret} | {secret for secret in secrets if secret}
    values = {value for value in values if len(value) >= _MIN_SECRET}
    if not values:
        return None
    encoded = {form for value in values for form in _base64_forms(value)}
    alternatives = [re.escape(form) for form in sorted(encoded, key=len, reverse=True)]
    alternatives += ["".join(_char_forms(c) for c in value) for value in sorted(values, key=len, reverse=True)]
    return re.compile("|".join(alternatives))


def _char_forms(c: str) -> str:
    """A pattern for ``c`` as itself, percent-encoded, JSON-escaped or backslash-escaped."""
    code = ord(c)
    forms = [re.escape(c), "\\\\" + re.escape(c)]
    hexes = ["%" + "%".join(f"{byte:02x}" for byte in c.encode())]
    if code < 0x10000:
        hexes.append(f"\\\\u{code:04x}")
    else:  # JSON writes it as a surrogate pair
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        hexes.append(f"\\\\u{high:04x}\\\\u{low:04x}")
    forms.append("(?i:" + "|".join(hexes) + ")")
    if c == " ":
        forms.append("\\+")
    return "(?:" + "|".join(forms) + ")"


def _base64_forms(value: str) -> set[str]:
    data = value.encode()
    standard, safe = base64.b64encode(data).decode(), base64.urlsafe_b64encode(data).decode()
    return {standard, safe, standard.rstrip("="), safe.rstrip("=")}


def escape_control(text: str) -> str:
    """``text`` with each control or format character (categories Cc and Cf: C0, DEL, C1,
    newlines and tabs, zero-width characters, bidi overrides) written as ``\\xNN`` (or
    ``\\uNNNN``, ``\\UNNNNNNNN`` past U+00FF): safe to print as one terminal line that reads as it shows."""
    return "".join(_escaped(c) if unicodedata.category(c) in ("Cc", "Cf") else c for c in text)


def _escaped(c: str) -> str:
    code = ord(c)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
