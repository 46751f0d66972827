"""The wire form of everything that crosses the stdio protocol (spec/protocol.md).

Operations travel field by field, each field by its kind in the operation
table (:mod:`kvconform.protocol.operations`); results by the operation's result kind;
the handshake as an :class:`~kvconform.values.AdapterInfo`. Every 64-bit integer
travels as a decimal string and every keyed binary64 float as its bit pattern
(``"0x"`` + 16 hex digits), so no JSON parser loses precision. The harness
(:mod:`kvconform.protocol.client`) and the reference server
(:mod:`kvconform.protocol.server`) share this one definition, one module per part:

- :mod:`.scalars` -- unsigned 64-bit integers, bit patterns, and the shape checks;
- :mod:`.values` -- each value an operation carries, and what a fault must be;
- :mod:`.requests` -- a request, field by field (:data:`FIELD_CODECS`);
- :mod:`.results` -- a result by its kind, and the outcome a response gives;
- :mod:`.handshake` -- ``hello`` and the adapter's self-description;
- :mod:`.lines` -- one JSON line, encoded and decoded, and the usual answer's short path.

Everything public is importable from here, as it was when this was one module.
"""

from __future__ import annotations

from kvconform.protocol.codec.handshake import (
    INFO_TEXT_LIMIT,
    PROTOCOL_VERSION,
    hello_request,
    info_from_wire,
    info_text,
    info_to_wire,
)
from kvconform.protocol.codec.lines import (
    REQUEST_LINE,
    decode_line,
    encode_json,
    encode_line,
    quick_outcome,
    request_line,
    request_tail,
)
from kvconform.protocol.codec.requests import FIELD_CODECS, from_wire, to_wire
from kvconform.protocol.codec.results import (
    RESPONSE_FORMS,
    SHOWN_LIMIT,
    outcome_of,
    result_from_wire,
    result_to_wire,
    result_type_problem,
)
from kvconform.protocol.codec.scalars import (
    WireError,
    bits_from_wire,
    bits_to_wire,
    u64_from_wire,
    u64_of,
    u64_to_wire,
)
from kvconform.protocol.codec.values import (
    error_value_problem,
    fault_from_wire,
    fault_problem,
    fault_to_wire,
    geometry_to_wire,
    layout_from_wire,
    layout_to_wire,
    param_from_wire,
    param_to_wire,
    signature_from_wire,
    signature_to_wire,
)
from kvconform.rendering import clip  # re-exported: the protocol clips with it

__all__ = [
    "FIELD_CODECS",
    "INFO_TEXT_LIMIT",
    "PROTOCOL_VERSION",
    "REQUEST_LINE",
    "RESPONSE_FORMS",
    "SHOWN_LIMIT",
    "WireError",
    "bits_from_wire",
    "bits_to_wire",
    "clip",
    "decode_line",
    "encode_json",
    "encode_line",
    "error_value_problem",
    "fault_from_wire",
    "fault_problem",
    "fault_to_wire",
    "from_wire",
    "geometry_to_wire",
    "hello_request",
    "info_from_wire",
    "info_text",
    "info_to_wire",
    "layout_from_wire",
    "layout_to_wire",
    "outcome_of",
    "param_from_wire",
    "param_to_wire",
    "quick_outcome",
    "request_line",
    "request_tail",
    "result_from_wire",
    "result_to_wire",
    "result_type_problem",
    "signature_from_wire",
    "signature_to_wire",
    "to_wire",
    "u64_from_wire",
    "u64_of",
    "u64_to_wire",
]
