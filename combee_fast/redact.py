"""Keeping secrets out of files and the terminal, and user text from driving the terminal.

- :func:`strip_userinfo`: a URL without ``user:password@`` (what files, ledgers and messages show;
  the request itself still uses the full URL).
- :func:`scrub`: text from a server (an error body) or an exception without the API key's value,
  the values of ``Authorization``-like headers, bearer tokens and URL credentials.
- :func:`escape_control`: control characters (ESC, BEL, CR, ...) written as ``\\xNN``, so text from
  a data file or a server cannot change the terminal title or clear the screen.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

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
    """``text`` with every secret value, header credential, bearer token and URL userinfo
    replaced by :data:`REDACTED` (URL userinfo is dropped)."""
    for secret in secrets:
        if secret and len(secret) >= _MIN_SECRET:
            text = text.replace(secret, REDACTED)
    text = _HEADER_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    return _URL_USERINFO.sub(r"\1", text)


def escape_control(text: str) -> str:
    """``text`` with each control character (C0, DEL, C1; newlines and tabs included) written
    as ``\\xNN``: safe to print as one terminal line."""
    return "".join(f"\\x{ord(c):02x}" if unicodedata.category(c) == "Cc" else c for c in text)
