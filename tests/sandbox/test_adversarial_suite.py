"""The adversarial suite, and the floors under it.

The attacks live with the code they attack: escapes from the sandbox
(``test_sandbox_escapes.py``), forged passes of answer code (``test_code_forgery.py``,
``test_forged_results.py``), user mistakes (``test_user_mistakes.py``), leaked keys
(``test_secrets.py`` and the leak forms below). This file counts those catalogues against
floors, so that dropping an attack is a visible edit here rather than a silent weakening, and
runs every form in which a leaking server plausibly returns a key through every place maslab
stores model or server text.
"""

from __future__ import annotations

import base64
import inspect
from secrets import token_hex
from urllib.parse import quote

import pytest
import test_code_forgery
import test_sandbox_escapes
import test_user_mistakes

from maslab.secrets import MARKER, redact, register_secret

FLOORS = {
    "sandbox escapes": 14,  # test functions, each run through both namespace backends
    "forged passes": 22,
    "user mistakes": 84,  # the command line's and Python's
    "key leak forms": 11,
}


def leak_forms(key: str) -> dict[str, str]:
    """A key as an echoing or hostile server might return it, written independently of
    :func:`maslab.secrets.encodings` (which these check)."""
    bearer = f"Bearer {key}".encode()
    return {
        "as it is": key,
        "upper-case": key.upper(),
        "lower-case": key.lower(),
        "URL-encoded": quote(key, safe=""),
        "JSON-escaped": "".join(f"\\u{ord(c):04x}" for c in key),
        "base64": base64.b64encode(key.encode()).decode(),
        "base64, unpadded": base64.b64encode(key.encode()).decode().rstrip("="),
        "URL-safe base64": base64.urlsafe_b64encode(key.encode()).decode(),
        "base64 of Bearer": base64.b64encode(bearer).decode(),
        "base64 of Bearer, unpadded": base64.b64encode(bearer).decode().rstrip("="),
        "URL-safe base64 of Bearer": base64.urlsafe_b64encode(bearer).decode(),
    }


def counts() -> dict[str, int]:
    escapes = [
        name for name, _ in inspect.getmembers(test_sandbox_escapes, inspect.isfunction)
        if name.startswith("test_")
    ]  # fmt: skip
    return {
        "sandbox escapes": len(escapes),
        "forged passes": len(test_code_forgery.ATTACKS),
        "user mistakes": len(test_user_mistakes.CLI) + len(test_user_mistakes.API),
        "key leak forms": len(leak_forms("sk-x")),
    }


def test_no_catalogue_shrinks_below_its_floor():
    found = counts()
    assert [name for name, floor in FLOORS.items() if found[name] < floor] == [], found


@pytest.mark.parametrize("form", leak_forms("sk-x").keys())
def test_every_leak_form_of_a_key_is_redacted(form):
    """A key with upper- and lower-case letters and characters that URL-encoding and base64
    change, sent back in each form inside ordinary text."""
    key = f"sk-Ab+/={token_hex(10)}Zq"
    register_secret(key)
    leaked = leak_forms(key)[form]
    text = redact(f'the server said "{leaked}" and went on')
    assert text == f'the server said "{MARKER}" and went on'
