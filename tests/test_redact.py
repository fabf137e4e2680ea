"""Secrets out of files and the terminal; control characters escaped."""

from __future__ import annotations

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
