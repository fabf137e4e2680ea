"""Secrets out of files and the terminal; control characters escaped."""

from __future__ import annotations

import base64
import json
import re
import string
import unicodedata
from urllib.parse import quote, quote_plus

from hypothesis import given, settings
from hypothesis import strategies as st

from combee_fast.redact import REDACTED, escape_control, scrub, strip_userinfo


def test_urls_lose_their_userinfo_only() -> None:
    assert strip_userinfo("http://user:pa%40ss@gpu1:8000/v1") == "http://gpu1:8000/v1"
    assert strip_userinfo("https://token@[::1]:8443/v1?x=1") == "https://[::1]:8443/v1?x=1"
    assert strip_userinfo("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"


def test_scrub_removes_keys_headers_tokens_and_url_credentials() -> None:
    body = ('{"error": "bad request", "echo": {"Authorization": "Bearer sk-abc123XYZ", "X-Api-Key": "k-9", '
            '"Cookie": "session=42"}, "seen": "sk-abc123XYZ", "url": "http://bob:hunter2@h/v1", "auth": "Basic Ym9iOmh1bnRlcjI="}')
    clean = scrub(body, secrets=["sk-abc123XYZ"])
    for secret in ("sk-abc123XYZ", "k-9", "session=42", "hunter2", "bob:", "Ym9iOmh1bnRlcjI="):
        assert secret not in clean, secret
    assert clean.count(REDACTED) >= 4 and "http://h/v1" in clean and "bad request" in clean


def test_short_or_empty_secrets_do_not_redact_ordinary_text() -> None:
    assert scrub("an ordinary line", secrets=["", "a"]) == "an ordinary line"


def test_control_characters_are_escaped_printables_kept() -> None:
    assert escape_control("field \x1b]0;pwned\x07 é\n\x9b") == "field \\x1b]0;pwned\\x07 é\\x0a\\x9b"


# -- a secret in every encoding a server may echo it in ------------------------------------------

RESERVED = string.punctuation + " "  # every URL-reserved and JSON-special printable character
secrets_strategy = st.text(alphabet=st.sampled_from(string.ascii_letters + string.digits + RESERVED + "é€😀"),
                           min_size=4, max_size=40)


def echoes(secret: str) -> dict[str, str]:
    """The forms a careless server echoes a secret in."""
    php = json.dumps(secret)[1:-1].replace("/", "\\/")
    every_char = "".join(f"\\u{ord(c):04x}" if ord(c) < 0x10000 else json.dumps(c)[1:-1] for c in secret)
    return {
        "raw": secret,
        "percent-encoded": quote(secret, safe=""),
        "percent-encoded, lower-case hex": re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), quote(secret, safe="")),
        "form-encoded": quote_plus(secret, safe=""),
        "JSON": json.dumps(secret)[1:-1],
        "JSON, non-ASCII kept": json.dumps(secret, ensure_ascii=False)[1:-1],
        "JSON with \\/ (PHP)": php,
        "JSON, every character \\uXXXX": every_char,
        "base64": base64.b64encode(secret.encode()).decode(),
        "base64, URL-safe, unpadded": base64.urlsafe_b64encode(secret.encode()).decode().rstrip("="),
        "Basic": "Basic " + base64.b64encode(f"alice:{secret}".encode()).decode(),
    }


@settings(max_examples=300, deadline=None)
@given(secret=secrets_strategy)
def test_a_secret_with_any_reserved_character_is_scrubbed_in_every_encoding(secret: str) -> None:
    basic = base64.b64encode(f"alice:{secret}".encode()).decode()
    for name, echoed in echoes(secret).items():
        text = f'{{"error": "denied", "echo": "{echoed}", "tail": "ok"}}'
        clean = scrub(text, [quote(secret, safe=""), basic])  # as the client holds it: the URL's raw password
        assert REDACTED in clean, name
        assert "denied" in clean and '"tail": "ok"' in clean, (name, clean)
        for form in echoes(secret).values():
            if len(form) >= 4 and form not in text.replace(echoed, ""):
                assert form.removeprefix("Basic ") not in clean, (name, form, clean)


def test_a_key_with_a_slash_is_scrubbed_when_a_server_escapes_it() -> None:
    key = "sk-live/0123456789/abcdef"
    for echoed in (key.replace("/", "\\/"), key.replace("/", "\\u002f"), key.replace("/", "%2F"), key.replace("/", "%2f")):
        assert scrub(f"bad key {echoed}!", [key]) == f"bad key {REDACTED}!"


def test_format_and_control_characters_are_escaped_bidi_overrides_included() -> None:
    line = "answer \u202egnp.exe\u202c \u200b\u2066x\u2069 \ufeff\x1b[31m é ü 😀"
    escaped = escape_control(line)
    assert escaped == "answer \\u202egnp.exe\\u202c \\u200b\\u2066x\\u2069 \\ufeff\\x1b[31m é ü 😀"
    assert all(unicodedata.category(c) not in ("Cc", "Cf") for c in escaped)
