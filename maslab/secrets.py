"""Secrets stay secret: a process-wide registry of secret values, and redaction.

Every API key maslab loads registers itself (:func:`register_secret`), with the encoded forms a
leaking server plausibly sends back (:func:`encodings`). :func:`redact` replaces the registered
values, and anything shaped like a credential (``Bearer <token>``, an
``Authorization`` header, ``sk-...`` keys, ``api_key=...``), with :data:`MARKER`. It is applied
wherever text leaves the process: error messages, result and trace lines, reports, the terminal.
:func:`scrub` is the cheap pass (registered values only) over every model reply once decoded
(:func:`maslab.llm.openai_compat.completion_from_payload`), so no cache, trace or method ever
holds a key that a server echoed back.
"""

from __future__ import annotations

import base64
import os
import re
import threading
from urllib.parse import quote

MARKER = "[REDACTED]"  # upper case: rich markup would take "[redacted]" for a style tag
MIN_SECRET_LENGTH = 8

_MARKER_BYTES = MARKER.encode()
# a credential-like value: 12 or more token characters, at least one letter and one digit
_TOKEN = r"(?=[\w.~+/=-]*\d)(?=[\w.~+/=-]*[A-Za-z])[\w.~+/=-]{12,}"
# what names a credential and stays visible: "Bearer ", "Authorization: Bearer ", "api_key=";
# redact_bytes sees JSON lines, so a quote may be escaped and "\n" may precede a word
_LABELLED = re.compile(
    r"(?P<label>(?i:(?:\b|(?<=\\[nrt]))bearer\s+|(?:authorization|api[_-]?key)\\?[\"']?\s*"
    rf"[:=]\s*\\?[\"']?(?:(?:bearer|basic|token)\s+)?)){_TOKEN}"
)
_LABEL_WORDS = ("bearer", "authorization", "api_key", "api-key", "apikey")  # one precedes each
_LABEL_BYTES = tuple(word.encode() for word in _LABEL_WORDS)
# sk-..., sk-proj-..., sk-ant-...: the literal comes first, so the regex engine finds it fast
_SK_KEY = re.compile(r"sk-(?:(?<!\wsk-)|(?<=\\[nrt]sk-))(?=[\w-]*\d)[\w-]{16,}")
_SECRET_VARIABLE = re.compile(r"(?:^|_)(?:KEY|APIKEY|TOKEN|SECRET|PASSWORD)$", re.IGNORECASE)

_lock = threading.Lock()
# registered values, longest first, as text and as UTF-8; replaced whole, so readers need no lock
_values: tuple[tuple[str, ...], tuple[bytes, ...]] = ((), ())


def register_secret(value: str | None) -> None:
    """Treat ``value`` as a secret from now on, in each form of :func:`encodings`; empty and
    very short values are ignored."""
    global _values
    value = (value or "").strip()
    if len(value) < MIN_SECRET_LENGTH or value in _values[0]:
        return
    with _lock:
        values = tuple(sorted({*_values[0], *encodings(value)}, key=len, reverse=True))
        _values = (values, tuple(v.encode() for v in values))


def encodings(value: str) -> set[str]:
    """The forms in which a leaking server plausibly sends ``value`` back: as it is, upper- and
    lower-case, URL-encoded, every character JSON-escaped (``\\u0073...``), and base64 (plain
    and URL-safe, padded or not) of the value and of ``Bearer <value>``. Not caught: the value
    cut into pieces (spaces, line breaks), inside a larger base64 text, or otherwise recoded."""
    forms = {value, value.upper(), value.lower(), quote(value, safe="")}
    forms.add("".join(f"\\u{ord(char):04x}" for char in value))
    for plain in (value, f"Bearer {value}"):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(plain.encode()).decode()
            forms |= {encoded, encoded.rstrip("=")}
    return {form for form in forms if len(form) >= MIN_SECRET_LENGTH}


def register_environment_secrets() -> None:
    """Register every environment variable named like a credential (``*_KEY``, ``*_TOKEN``,
    ``*_SECRET``, ``*_PASSWORD``): where providers such as litellm read their keys."""
    for name, value in os.environ.items():
        if _SECRET_VARIABLE.search(name):
            register_secret(value)


def _keep_label(match: re.Match[str]) -> str:
    return match.group("label") + MARKER


def redact(text: str) -> str:
    """``text`` with every registered secret and credential-shaped string replaced by MARKER.

    Each pass runs only when a plain substring test says it could match.
    """
    for value in _values[0]:
        if value in text:
            text = text.replace(value, MARKER)
    if "sk-" in text:
        text = _SK_KEY.sub(MARKER, text)
    lower = text.lower()
    if any(word in lower for word in _LABEL_WORDS):
        text = _LABELLED.sub(_keep_label, text)
    return text


def redact_bytes(data: bytes) -> bytes:
    """:func:`redact` for UTF-8 bytes (a JSON line); returns ``data`` itself when clean (told
    on the bytes, without decoding them: every pattern starts with ASCII)."""
    if not _may_hold_secret(data):
        return data
    text = data.decode("utf-8", "surrogateescape")
    clean = redact(text)
    return data if clean is text else clean.encode("utf-8", "surrogateescape")


def _may_hold_secret(data: bytes) -> bool:
    """Whether :func:`redact` could change ``data``'s text: a registered value, ``sk-`` or a
    label word is in it (the label words in any case)."""
    if not data.isascii() or b"sk-" in data or any(value in data for value in _values[1]):
        return True  # non-ASCII: a letter such as the Kelvin sign lower-cases to a label's
    lower = data.lower()  # ASCII: as the text would lower-case
    return any(word in lower for word in _LABEL_BYTES)


def scrub(payload: bytes) -> bytes:
    """``payload`` with every registered secret replaced: a few µs, nothing when none is known."""
    for value in _values[1]:
        if value in payload:
            payload = payload.replace(value, _MARKER_BYTES)
    return payload
