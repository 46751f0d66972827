"""The operation table: every operation of the protocol, declared once (spec/protocol.md).

An operation is a frozen dataclass, and its declaration says everything about it:

- ``name``: the wire ``op``, the scenario verb and the Python adapter method, one word;
- ``needs``: the conformance class an implementation declares to be asked it (CONF-2);
- ``result``: the kind of value an ``ok`` answer carries (:data:`ResultKind`);
- its fields, in order, with their types: the members of the request and, except for
  a :data:`NewHandle`, the adapter method's parameters in the same order.

Handles are names chosen by the harness (so a whole program can be sent before any
answer is read), typed by what the operation does with them: a :data:`NewHandle`
names what the operation creates (the adapter's return value, bound to that name);
a :data:`Handle` is resolved to a live object and passed; a :data:`Released` one is
passed, then forgotten.

Everything else is derived from this table: dispatch to a Python adapter
(:func:`kvconform.protocol.driver.call`, used in process and by the stdio server),
the wire codec and the result codec (:mod:`.codec`), and the per-operation JSON
Schemas in ``conformance/schema/protocol/ops/`` (checked against :data:`TABLE` by
``tests/test_operations.py``). ``docs/operations.md`` says how to add an operation.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

from kvconform.values import (
    Geometry,
    Layout,
    MixOp,
    ModelSpec,
    Payload,
    PlanIdentity,
    Signature,
    StepInputs,
)

#: A name the operation binds to the object the adapter creates.
NewHandle = Annotated[str, "new_handle"]
#: The name of a live object, resolved and passed to the adapter.
Handle = Annotated[str, "handle"]
#: The name of a live object, passed to the adapter and then forgotten.
Released = Annotated[str, "released"]

#: What an ``ok`` answer carries: nothing, an unsigned 64-bit id or key (a decimal
#: string on the wire), a list of them, a count (a JSON integer), a boolean, or a
#: signature. A refusal (an ``error`` answer) is possible for every operation.
ResultKind = Literal["null", "u64", "u64_list", "count", "bool", "signature", "validity"]

#: How reads of a ``u64`` result are compared with each other (CONF-12).
Relation = Literal["order", "equality"]

#: The kind of each field type: what the codec and the schemas know a field by.
FieldKind = Literal[
    "new_handle",
    "handle",
    "released",
    "str",
    "bool",
    "count",
    "count_or_null",
    "program",
    "model_spec",
    "geometry",
    "plan_identity",
    "step",
    "payload",
    "signature",
    "signature_or_null",
    "layout_or_null",
    "str_or_null",
    "str_list",
]


@dataclass(frozen=True)
class Op:
    """Base of every operation."""

    name: ClassVar[str] = ""
    needs: ClassVar[str] = ""
    result: ClassVar[ResultKind] = "null"
    #: The requirements a disagreement with the reference at this operation bears on:
    #: what the generated differential checks cite for it (CONF-12).
    cites: ClassVar[tuple[str, ...]] = ()
    #: For a ``u64`` result compared only by relation (CONF-12): what one read is called,
    #: and the relation judged: ``order`` for ids (equal, smaller, greater; ID-8),
    #: ``equality`` for keys (PLAN-3 leaves their values free).
    relation: ClassVar[tuple[str, Relation] | None] = None
    #: The requirement by which a read is never 0, if there is one (ID-1, ALLOC-1).
    nonzero: ClassVar[str] = ""
    #: Why the generated differential checks never draw this operation; empty when
    #: they do (every operation of the classes an implementation declares).
    not_generated: ClassVar[str] = ""


@dataclass(frozen=True)
class Hash(Op):
    """Run a mix program from a fresh hasher; the value of each ``finish`` (HASH-*)."""

    name: ClassVar[str] = "hash"
    needs: ClassVar[str] = "hash"
    result: ClassVar[ResultKind] = "u64_list"
    cites: ClassVar[tuple[str, ...]] = ("HASH-11",)
    program: tuple[MixOp, ...]


@dataclass(frozen=True)
class ModelNew(Op):
    """Load a model (ID-1)."""

    name: ClassVar[str] = "model_new"
    needs: ClassVar[str] = "identity"
    cites: ClassVar[tuple[str, ...]] = ("ID-1",)
    handle: NewHandle
    spec: ModelSpec


@dataclass(frozen=True)
class ModelReload(Op):
    """Load the same model again: a new instance (ID-2)."""

    name: ClassVar[str] = "model_reload"
    needs: ClassVar[str] = "identity"
    cites: ClassVar[tuple[str, ...]] = ("ID-6",)
    model: Handle
    handle: NewHandle


@dataclass(frozen=True)
class ModelSetHook(Op):
    """Attach or remove a hook (ID-3, ID-10)."""

    name: ClassVar[str] = "model_set_hook"
    needs: ClassVar[str] = "identity"
    cites: ClassVar[tuple[str, ...]] = ("ID-10",)
    model: Handle
    hook: str
    present: bool


@dataclass(frozen=True)
class ModelInstanceId(Op):
    name: ClassVar[str] = "model_instance_id"
    needs: ClassVar[str] = "identity"
    result: ClassVar[ResultKind] = "u64"
    cites: ClassVar[tuple[str, ...]] = ("ID-2", "ID-3", "ID-6", "ID-10")
    relation: ClassVar[tuple[str, Relation] | None] = ("instance id", "order")
    nonzero: ClassVar[str] = "ID-1"
    model: Handle


@dataclass(frozen=True)
class CacheNew(Op):
    name: ClassVar[str] = "cache_new"
    needs: ClassVar[str] = "identity"
    cites: ClassVar[tuple[str, ...]] = ("ALLOC-2",)
    handle: NewHandle
    geometry: Geometry


@dataclass(frozen=True)
class CacheAppend(Op):
    name: ClassVar[str] = "cache_append"
    needs: ClassVar[str] = "identity"
    cites: ClassVar[tuple[str, ...]] = ("ALLOC-7", "ALLOC-16")
    cache: Handle
    tokens: int


@dataclass(frozen=True)
class CacheTruncate(Op):
    name: ClassVar[str] = "cache_truncate"
    needs: ClassVar[str] = "identity"
    cites: ClassVar[tuple[str, ...]] = ("ALLOC-5", "ALLOC-15")
    cache: Handle
    length: int


@dataclass(frozen=True)
class CacheClear(Op):
    name: ClassVar[str] = "cache_clear"
    needs: ClassVar[str] = "identity"
    cites: ClassVar[tuple[str, ...]] = ("ALLOC-18",)
    cache: Handle


@dataclass(frozen=True)
class CacheReplaceLayer(Op):
    """Replace one layer's storage; ``None`` shape fields mean "the cache's own"."""

    name: ClassVar[str] = "cache_replace_layer"
    needs: ClassVar[str] = "identity"
    cites: ClassVar[tuple[str, ...]] = ("ALLOC-4", "ALLOC-9", "ALLOC-17")
    cache: Handle
    layer: int
    n_kv_heads: int | None = None
    head_dim: int | None = None
    max_seq_len: int | None = None


@dataclass(frozen=True)
class CacheAllocId(Op):
    name: ClassVar[str] = "cache_alloc_id"
    needs: ClassVar[str] = "identity"
    result: ClassVar[ResultKind] = "u64"
    cites: ClassVar[tuple[str, ...]] = ("ALLOC-1", "ALLOC-13")
    relation: ClassVar[tuple[str, Relation] | None] = ("allocation id", "order")
    nonzero: ClassVar[str] = "ALLOC-1"
    cache: Handle


@dataclass(frozen=True)
class CacheLen(Op):
    name: ClassVar[str] = "cache_len"
    needs: ClassVar[str] = "identity"
    result: ClassVar[ResultKind] = "count"
    cites: ClassVar[tuple[str, ...]] = ("ALLOC-5", "ALLOC-15", "ALLOC-16", "ALLOC-11")
    cache: Handle


@dataclass(frozen=True)
class PlanKey(Op):
    """The key of a plan identity given field by field (PLAN-*)."""

    name: ClassVar[str] = "plan_key"
    needs: ClassVar[str] = "plan"
    result: ClassVar[ResultKind] = "u64"
    cites: ClassVar[tuple[str, ...]] = ("PLAN-3", "PLAN-16")
    relation: ClassVar[tuple[str, Relation] | None] = ("plan key", "equality")
    identity: PlanIdentity


@dataclass(frozen=True)
class SessionNew(Op):
    """Build a decode plan for a model and a cache, and hold it."""

    name: ClassVar[str] = "session_new"
    needs: ClassVar[str] = "plan"
    cites: ClassVar[tuple[str, ...]] = ("PLAN-1",)
    handle: NewHandle
    model: Handle
    cache: Handle
    step_tokens: int = 1


@dataclass(frozen=True)
class SessionValid(Op):
    """Whether the held plan may be reused for this model, cache and step."""

    name: ClassVar[str] = "session_valid"
    needs: ClassVar[str] = "plan"
    result: ClassVar[ResultKind] = "bool"
    cites: ClassVar[tuple[str, ...]] = ("PLAN-4",)
    session: Handle
    model: Handle
    cache: Handle
    step: StepInputs


@dataclass(frozen=True)
class Drop(Op):
    """Release a model, cache or session; the harness keeps no reference after it."""

    name: ClassVar[str] = "drop"
    needs: ClassVar[str] = "identity"
    cites: ClassVar[tuple[str, ...]] = ("PLAN-14",)
    handle: Released


#: Metadata of a field added to an operation after protocol 1 was published: left out
#: of a request at its default, and passed to a Python adapter as a keyword only when
#: present (PROTO-31).
ADDED = {"added": True}


@dataclass(frozen=True)
class Measure(Op):
    """The signature measured from a payload (SIG-*); a v2 writer measures under ``layout``."""

    name: ClassVar[str] = "measure"
    needs: ClassVar[str] = "signature"
    result: ClassVar[ResultKind] = "signature"
    cites: ClassVar[tuple[str, ...]] = ("SIG-2", "SIG-9")
    model: str
    payload: Payload
    layout: Layout | None = dataclasses.field(default=None, metadata=ADDED)


@dataclass(frozen=True)
class Stamp(Op):
    """A block stamped for storage: its signature, measured (SIG-*, PROF-6)."""

    name: ClassVar[str] = "stamp"
    needs: ClassVar[str] = "signature"
    result: ClassVar[ResultKind] = "signature"
    cites: ClassVar[tuple[str, ...]] = ("SIG-13",)
    model: str
    payload: Payload
    layout: Layout | None = dataclasses.field(default=None, metadata=ADDED)


@dataclass(frozen=True)
class Verify(Op):
    """Check a stored block against what the reader expects (VERIFY-*)."""

    name: ClassVar[str] = "verify"
    needs: ClassVar[str] = "verify"
    result: ClassVar[ResultKind] = "signature"
    cites: ClassVar[tuple[str, ...]] = ("VERIFY-9",)
    recorded: Signature | None
    payload: Payload
    expected: Signature


@dataclass(frozen=True)
class CacheNewPlaced(Op):
    """A cache with a stated residency and one storage label per layer (PLAN-21)."""

    name: ClassVar[str] = "cache_new_placed"
    needs: ClassVar[str] = "plan_validity"
    cites: ClassVar[tuple[str, ...]] = ("PLAN-21",)
    handle: NewHandle
    geometry: Geometry
    residency: str | None
    layer_storage: tuple[str, ...]


@dataclass(frozen=True)
class SessionValidity(Op):
    """The held plan's outcome for this model, cache and step (PLAN-19)."""

    name: ClassVar[str] = "session_validity"
    needs: ClassVar[str] = "plan_validity"
    result: ClassVar[ResultKind] = "validity"
    cites: ClassVar[tuple[str, ...]] = ("PLAN-19", "PLAN-20")
    session: Handle
    model: Handle
    cache: Handle
    step: StepInputs


@dataclass(frozen=True)
class SessionRebind(Op):
    """Rebind the held plan to a cache's allocation, guarded, all or nothing (PLAN-21)."""

    name: ClassVar[str] = "session_rebind"
    needs: ClassVar[str] = "plan_validity"
    cites: ClassVar[tuple[str, ...]] = ("PLAN-21", "PLAN-26")
    not_generated: ClassVar[str] = (
        "what a rebind to a cache the plan is stale for answers, and so what the plan is "
        "bound to afterwards, is left open (PLAN-24): a random rebind would make every later "
        "answer about its plan a point of policy; the scenarios judge rebinding"
    )
    session: Handle
    cache: Handle


@dataclass(frozen=True)
class PrefixNew(Op):
    """A prefix cache: one engine process's store of computed blocks (PREFIX-6).

    ``model``, ``kv_dtype``, ``layout`` and ``shard`` describe what the process computes
    (PREFIX-21); ``capacity``, if given, the most blocks it holds (PREFIX-24).
    """

    name: ClassVar[str] = "prefix_new"
    needs: ClassVar[str] = "prefix_cache"
    cites: ClassVar[tuple[str, ...]] = ("PREFIX-6",)
    handle: NewHandle
    block_size: int
    model: str
    kv_dtype: str
    layout: str
    shard: str
    capacity: int | None = dataclasses.field(default=None, metadata=ADDED)


@dataclass(frozen=True)
class TierNew(Op):
    """A shared tier outside every process (PREFIX-21), kept in ``storage`` if given (PROTO-36)."""

    name: ClassVar[str] = "tier_new"
    needs: ClassVar[str] = "prefix_cache"
    cites: ClassVar[tuple[str, ...]] = ("PREFIX-21",)
    handle: NewHandle
    storage: str | None = dataclasses.field(default=None, metadata=ADDED)


@dataclass(frozen=True)
class PrefixAttach(Op):
    """The prefix cache now writes what it stores to the tier and reads it (PREFIX-21, 22)."""

    name: ClassVar[str] = "prefix_attach"
    needs: ClassVar[str] = "prefix_cache"
    cites: ClassVar[tuple[str, ...]] = ("PREFIX-21", "PREFIX-22")
    prefix: Handle
    tier: Handle


@dataclass(frozen=True)
class LoraLoad(Op):
    """Load an adapter (LoRA) into a prefix cache's process: a new instance (PREFIX-8).

    ``weights`` stands for the adapter's weights: equal labels, equal weights.
    """

    name: ClassVar[str] = "lora_load"
    needs: ClassVar[str] = "prefix_cache"
    cites: ClassVar[tuple[str, ...]] = ("PREFIX-8",)
    handle: NewHandle
    prefix: Handle
    adapter_name: str
    weights: str


@dataclass(frozen=True)
class RequestNew(Op):
    """A request: token ids (decimal, separated by single spaces), a salt and a user key,
    each ``None`` when absent (PREFIX-13 to PREFIX-15)."""

    name: ClassVar[str] = "request_new"
    needs: ClassVar[str] = "prefix_cache"
    cites: ClassVar[tuple[str, ...]] = ("PREFIX-14",)
    handle: NewHandle
    tokens: str
    salt: str | None = None
    user_key: str | None = None


@dataclass(frozen=True)
class RequestLora(Op):
    """Run a request through an adapter instance (PREFIX-7)."""

    name: ClassVar[str] = "request_lora"
    needs: ClassVar[str] = "prefix_cache"
    cites: ClassVar[tuple[str, ...]] = ("PREFIX-7",)
    request: Handle
    lora: Handle


@dataclass(frozen=True)
class RequestMedia(Op):
    """Place a media item over ``length`` positions from ``start`` (PREFIX-9 to PREFIX-11).

    ``content`` stands for the item's decoded bytes (equal labels, equal bytes);
    ``caller_id`` is the caller's identifier for it, or ``None``.
    """

    name: ClassVar[str] = "request_media"
    needs: ClassVar[str] = "prefix_cache"
    cites: ClassVar[tuple[str, ...]] = ("PREFIX-9", "PREFIX-10")
    request: Handle
    start: int
    length: int
    content: str
    width: int
    height: int
    caller_id: str | None = None


@dataclass(frozen=True)
class RequestEmbeds(Op):
    """Feed embeddings instead of token ids over ``length`` positions from ``start``
    (PREFIX-17); ``content`` stands for the embeddings' bytes."""

    name: ClassVar[str] = "request_embeds"
    needs: ClassVar[str] = "prefix_cache"
    cites: ClassVar[tuple[str, ...]] = ("PREFIX-17",)
    request: Handle
    start: int
    length: int
    content: str


@dataclass(frozen=True)
class PrefixStore(Op):
    """The request was computed: store its blocks (and write them to the tier, if any)."""

    name: ClassVar[str] = "prefix_store"
    needs: ClassVar[str] = "prefix_cache"
    cites: ClassVar[tuple[str, ...]] = ("PREFIX-18",)
    prefix: Handle
    request: Handle


@dataclass(frozen=True)
class PrefixLookup(Op):
    """How many leading positions of the request the prefix cache would reuse (PREFIX-1)."""

    name: ClassVar[str] = "prefix_lookup"
    needs: ClassVar[str] = "prefix_cache"
    result: ClassVar[ResultKind] = "count"
    cites: ClassVar[tuple[str, ...]] = ("PREFIX-1", "PREFIX-2", "PREFIX-3")
    prefix: Handle
    request: Handle


#: The protocol's own operations, outside the table: the handshake, the end of a
#: program, the end of a session, and a batch of ``hash`` programs in one line.
CONTROL = ("hello", "reset", "shutdown", "hash_batch")


@dataclass(frozen=True)
class FieldSpec:
    name: str
    kind: FieldKind
    #: Whether a request may leave the field out (the declared default applies).
    optional: bool
    #: Added after protocol 1: left out of a request at its default, passed to a
    #: Python adapter as a keyword only when present (PROTO-31).
    added: bool = False


@dataclass(frozen=True)
class OpSpec:
    """One row of the table, as the rest of the harness reads it (views computed once)."""

    cls: type[Op]
    name: str
    needs: str
    result: ResultKind
    fields: tuple[FieldSpec, ...]
    #: See :class:`Op`: what a disagreement cites, how ``u64`` reads relate, the
    #: requirement that a read is never 0, why the generated checks never draw it.
    cites: tuple[str, ...] = ()
    relation: tuple[str, Relation] | None = None
    nonzero: str = ""
    not_generated: str = ""

    @property
    def method(self) -> str:
        """The Python adapter method: the operation's name."""
        return self.name

    @functools.cached_property
    def arguments(self) -> tuple[FieldSpec, ...]:
        """The fields passed positionally to the adapter method, in order.

        Every field but a new handle and a field added after protocol 1 (PROTO-31).
        """
        return tuple(f for f in self.fields if f.kind != "new_handle" and not f.added)

    @functools.cached_property
    def added(self) -> tuple[FieldSpec, ...]:
        """The fields added after protocol 1, passed as keywords only when present."""
        return tuple(f for f in self.fields if f.added)

    @functools.cached_property
    def binds(self) -> str | None:
        """The field naming what the operation creates, if it creates something."""
        return next((f.name for f in self.fields if f.kind == "new_handle"), None)

    @functools.cached_property
    def releases(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields if f.kind == "released")

    @property
    def makes(self) -> str | None:
        """What the operation creates, if it binds a handle: the first word of its name
        (``model_reload`` makes a model, ``cache_new_placed`` a cache). A :data:`Handle`
        field is named after the kind of object it takes (``model``, ``cache``,
        ``session``); ``tests/test_operations.py`` holds the table to both conventions."""
        return self.name.split("_")[0] if self.binds is not None else None

    @property
    def handles(self) -> tuple[str, ...]:
        """The fields naming a live object the operation uses (and does not release)."""
        return tuple(f.name for f in self.fields if f.kind == "handle")


_KIND_OF_TYPE: dict[object, FieldKind] = {
    NewHandle: "new_handle",
    Handle: "handle",
    Released: "released",
    str: "str",
    bool: "bool",
    int: "count",
    int | None: "count_or_null",
    tuple[MixOp, ...]: "program",
    ModelSpec: "model_spec",
    Geometry: "geometry",
    PlanIdentity: "plan_identity",
    StepInputs: "step",
    Payload: "payload",
    Signature: "signature",
    Signature | None: "signature_or_null",
    Layout | None: "layout_or_null",
    str | None: "str_or_null",
    tuple[str, ...]: "str_list",
}


@functools.cache
def _hint(text: str, module: str) -> object:
    """An annotation kept as text, evaluated once (``get_type_hints`` compiles each anew)."""
    return eval(text, vars(sys.modules[module]))  # a module's own annotations, never input


def _spec(cls: type[Op]) -> OpSpec:
    fields = []
    for f in dataclasses.fields(cls):
        owner = next(c for c in cls.__mro__ if f.name in vars(c).get("__annotations__", {}))
        hint = _hint(f.type, owner.__module__) if isinstance(f.type, str) else f.type
        kind = _KIND_OF_TYPE.get(hint)
        if kind is None:
            raise TypeError(f"{cls.__name__}.{f.name}: no field kind for {hint!r}")
        fields.append(
            FieldSpec(
                f.name, kind, f.default is not dataclasses.MISSING, bool(f.metadata.get("added"))
            )
        )
    return OpSpec(
        cls, cls.name, cls.needs, cls.result, tuple(fields),
        cls.cites, cls.relation, cls.nonzero, cls.not_generated
    )  # fmt: skip


#: The table, in the protocol document's order.
TABLE: tuple[OpSpec, ...] = tuple(
    _spec(cls)
    for cls in (
        Hash,
        ModelNew,
        ModelReload,
        ModelSetHook,
        ModelInstanceId,
        CacheNew,
        CacheAppend,
        CacheTruncate,
        CacheClear,
        CacheReplaceLayer,
        CacheAllocId,
        CacheLen,
        PlanKey,
        SessionNew,
        SessionValid,
        Drop,
        Measure,
        Stamp,
        Verify,
        CacheNewPlaced,
        SessionValidity,
        SessionRebind,
        PrefixNew,
        TierNew,
        PrefixAttach,
        LoraLoad,
        RequestNew,
        RequestLora,
        RequestMedia,
        RequestEmbeds,
        PrefixStore,
        PrefixLookup,
    )
)
#: The table by wire name (= scenario verb = adapter method).
BY_NAME: dict[str, OpSpec] = {spec.name: spec for spec in TABLE}
#: The table by operation class.
BY_CLASS: dict[type[Op], OpSpec] = {spec.cls: spec for spec in TABLE}
#: The operation classes by wire name.
OPERATIONS: dict[str, type[Op]] = {spec.name: spec.cls for spec in TABLE}
