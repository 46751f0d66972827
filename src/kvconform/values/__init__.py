"""Values exchanged between the harness and an implementation (spec/conformance.md).

They are language-neutral on purpose: each has a JSON form on the wire
(:mod:`kvconform.protocol.codec`), and nothing here refers to the reference
implementation. The parts: :mod:`.operands` (what an operation carries and returns),
:mod:`.options` (classes, format versions, options and decisions: data tables),
:mod:`.declaration` (what an implementation says about itself) and :mod:`.outcomes`
(the outcome of one operation). Everything is importable from here.
"""

from __future__ import annotations

from kvconform.values.declaration import CAPABILITIES, PARAM_TYPES, PREFIX_INPUTS, AdapterInfo
from kvconform.values.operands import (
    VALIDITY_OUTCOMES,
    ErrorValue,
    Fault,
    Geometry,
    LayerDesc,
    Layout,
    MixKind,
    MixOp,
    ModelSpec,
    Param,
    Payload,
    PlanIdentity,
    Signature,
    StepInputs,
)
from kvconform.values.options import (
    CLASS_REQUIRES,
    CLASSES,
    DECISIONS,
    FORMAT_VERSIONS,
    OPTION_DECISIONS,
    OPTIONS,
    PREFIX_BLOCK_SIZES,
    SHAPE_FIELDS,
    OptionSpec,
)
from kvconform.values.outcomes import Broken, Ok, Outcome, Refused

__all__ = [
    "CAPABILITIES",
    "CLASSES",
    "CLASS_REQUIRES",
    "DECISIONS",
    "FORMAT_VERSIONS",
    "OPTIONS",
    "OPTION_DECISIONS",
    "PARAM_TYPES",
    "PREFIX_BLOCK_SIZES",
    "PREFIX_INPUTS",
    "SHAPE_FIELDS",
    "VALIDITY_OUTCOMES",
    "AdapterInfo",
    "Broken",
    "ErrorValue",
    "Fault",
    "Geometry",
    "LayerDesc",
    "Layout",
    "MixKind",
    "MixOp",
    "ModelSpec",
    "Ok",
    "OptionSpec",
    "Outcome",
    "Param",
    "Payload",
    "PlanIdentity",
    "Refused",
    "Signature",
    "StepInputs",
]
