"""The outcome of one operation: a value, a refusal, or a broken answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from kvconform.values.operands import Fault


@dataclass(frozen=True)
class Ok:
    """The operation succeeded, with its value (``None`` for operations without one)."""

    value: object = None


@dataclass(frozen=True)
class Refused:
    """The operation was refused with a semantic error."""

    fault: Fault


@dataclass(frozen=True)
class Broken:
    """The adapter failed: an exception, a crash, a timeout, a malformed reply.

    Never a conformance answer: a step that gets one fails, whatever it expected.
    """

    reason: str
    detail: str = ""
    #: The adapter answered ``ok`` with a value the operation cannot have: a success
    #: claimed in a malformed body, which a must-not-succeed probe fails (CONF-9), as
    #: it fails a well-formed ``ok``; a crash, a timeout or a garbled line does not.
    claims_success: bool = False


Outcome: TypeAlias = Ok | Refused | Broken
