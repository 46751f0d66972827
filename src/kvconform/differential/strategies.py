"""Hypothesis strategies that write valid programs for the generated checks.

Every program stays inside the operations' preconditions (a handle is used only
while it is live, a hook toggled only if the model's configuration declares it,
shapes and counts are positive where the operations require it), so the
reference answers every operation; what varies is everything an implementation
can get wrong. Every value a program holds can be written in a scenario file
(:mod:`kvconform.harness.export`; NaN payloads by their bits), so any
counterexample can be replayed.

Choices are ordered so that Hypothesis shrinks toward short, plain programs:
the first rule, the first preset and the absence of a fault come first.
"""

from __future__ import annotations

import dataclasses
import math
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from hypothesis import strategies as st

from kvconform.differential.compare import Program
from kvconform.harness.declarations import as_u64_mixes, outside_schema
from kvconform.protocol import operations as ops
from kvconform.values import (
    SHAPE_FIELDS,
    AdapterInfo,
    Geometry,
    LayerDesc,
    MixOp,
    ModelSpec,
    Param,
    PlanIdentity,
    Signature,
    StepInputs,
)

T = TypeVar("T")
Draw = Callable[[st.SearchStrategy[T]], T]

U64_MAX = (1 << 64) - 1

# Values ----------------------------------------------------------------------------

#: u64 values where byte order, sign and width mistakes show.
U64_EDGES = (
    0,
    1,
    2,
    0xFF,
    0x100,
    0xFFFF_FFFF,
    1 << 32,
    (1 << 63) - 1,
    1 << 63,
    U64_MAX - 1,
    U64_MAX,
)

u64s: st.SearchStrategy[int] = st.one_of(
    st.sampled_from(U64_EDGES), st.integers(0, U64_MAX), st.integers(0, 1000)
)

#: binary64 bit patterns: signed zeros, subnormals, infinities, quiet and
#: signalling NaNs with payloads and signs, ordinary numbers.
F64_EDGES = (
    0x0000_0000_0000_0000,  # +0.0
    0x8000_0000_0000_0000,  # -0.0
    0x0000_0000_0000_0001,  # smallest subnormal
    0x8000_0000_0000_0001,  # smallest negative subnormal
    0x000F_FFFF_FFFF_FFFF,  # largest subnormal
    0x0010_0000_0000_0000,  # smallest normal
    0x7FF0_0000_0000_0000,  # +inf
    0xFFF0_0000_0000_0000,  # -inf
    0x7FF8_0000_0000_0000,  # the canonical quiet NaN
    0xFFF8_0000_0000_0000,  # negative quiet NaN
    0x7FF0_0000_0000_0001,  # signalling NaN, payload 1
    0x7FF4_0000_0000_0000,  # signalling NaN
    0x7FF8_0000_0000_0001,  # quiet NaN with a payload
    0x7FFF_FFFF_FFFF_FFFF,  # NaN, all payload bits
    0xFFFF_FFFF_FFFF_FFFF,  # negative NaN, all payload bits
    0x3FF0_0000_0000_0000,  # 1.0
    0x7FEF_FFFF_FFFF_FFFF,  # largest finite
)


def f64_bits(value: float) -> int:
    return int.from_bytes(struct.pack("<d", value), "little")


f64_patterns: st.SearchStrategy[int] = st.one_of(
    st.sampled_from(F64_EDGES), st.integers(0, U64_MAX), st.floats().map(f64_bits)
)

#: Strings where encoding mistakes show: empty, NUL, combining marks, a BOM,
#: 2-, 3- and 4-byte UTF-8 sequences, the last code point.
SPECIAL_STRINGS = (
    "",
    "a",
    "ab",
    "\x00",
    "é",
    "e\u0301",
    "\ufeff",
    "日本語",
    "𝄞",
    "\U0001f600\U0001f600",
    "\U0010ffff",
    "a\x00b",
    "\u2028\x85",
)

#: Any text a string primitive accepts: no unpaired surrogates (HASH-13 refuses those).
texts: st.SearchStrategy[str] = st.one_of(
    st.sampled_from(SPECIAL_STRINGS),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=10),
)


_FLOAT_EDGES = (
    1e-5,
    1e-6,
    0.0,
    -0.0,
    5e-324,
    2.2250738585072014e-308,
    math.inf,
    -math.inf,
    math.nan,
    0.5,
    10000.0,
    500000.0,
    1e300,
)


def f64_from_bits(bits: int) -> float:
    return float(struct.unpack("<d", bits.to_bytes(8, "little"))[0])


#: Float parameters, NaN payloads and signed zeros included (PLAN-16 names both).
param_floats: st.SearchStrategy[float] = st.one_of(
    st.sampled_from(_FLOAT_EDGES), st.floats(), st.sampled_from(F64_EDGES).map(f64_from_bits)
)
param_values: st.SearchStrategy[Param] = st.one_of(
    st.integers(0, 64), st.sampled_from(U64_EDGES), param_floats, texts
)

# Models, caches, step inputs ----------------------------------------------------------

_FAMILIES = ("llama", "mistral", "Llama", "qwen2", "gemma-2", "模型", "𝄞", "")
_PARAM_NAMES = ("n_heads", "rope_theta", "rms_norm_eps", "mask_policy", "vocab_size", "ε")
_HOOK_NAMES = ("lora", "logit_bias", "sampler", "steering")

#: A few fixed models, so that a dropped model's configuration is often built again.
PRESET_MODELS = (
    ModelSpec("llama", (("n_heads", 32), ("rms_norm_eps", 1e-5)), (("lora", False),)),
    ModelSpec("llama", (("n_heads", 32), ("rms_norm_eps", 1e-5)), (("lora", True),)),
    ModelSpec(
        "mistral",
        (("mask_policy", "sliding"), ("rope_theta", 1e6)),
        (("lora", True), ("logit_bias", False)),
    ),
    ModelSpec("qwen2", (("rms_norm_eps", -0.0),), ()),
)

model_specs: st.SearchStrategy[ModelSpec] = st.one_of(
    st.sampled_from(PRESET_MODELS),
    st.builds(
        lambda family, params, hooks: ModelSpec(
            family, tuple(params.items()), tuple(hooks.items())
        ),
        st.sampled_from(_FAMILIES),
        st.dictionaries(st.sampled_from(_PARAM_NAMES), param_values, max_size=3),
        st.dictionaries(st.sampled_from(_HOOK_NAMES), st.booleans(), max_size=3),
    ),
)

DTYPES = ("f32", "f16", "bf16")

#: A few fixed geometries, so that two caches of identical geometry are common.
PRESET_GEOMETRIES = (
    Geometry(2, 2, 4, 8),
    Geometry(1, 1, 1, 3),
    Geometry(3, 2, 2, 6, "f16"),
)

geometries: st.SearchStrategy[Geometry] = st.one_of(
    st.sampled_from(PRESET_GEOMETRIES),
    st.builds(
        Geometry,
        n_layers=st.integers(1, 3),
        n_kv_heads=st.integers(1, 3),
        head_dim=st.integers(1, 4),
        max_seq_len=st.integers(1, 8),
        dtype=st.sampled_from(DTYPES),
    ),
)


_token_id = st.integers(0, 2**31 - 1)
_write_offsets = st.one_of(st.just(0), st.integers(0, 4096))
_thetas = st.one_of(st.sampled_from((10000.0, 500000.0, 1e6)), st.floats(1.0, 1e7))
_scalings = st.one_of(st.none(), st.sampled_from((8.0, 1.0, 0.25)), st.floats(0.01, 64.0))
_masks = st.lists(st.integers(0, 1), max_size=6)


def step_inputs(draw: Draw[Any], step_tokens: int) -> StepInputs:
    """Random per-step inputs; usually ``step_tokens`` tokens, one time in four any count
    (another count makes any plan invalid, which would hide what else the check sees)."""
    count = step_tokens if draw(st.integers(0, 3)) < 3 else draw(st.integers(1, 4))
    return StepInputs(
        token_ids=tuple(draw(_token_id) for _ in range(count)),
        write_offset=draw(_write_offsets),
        rope_theta=draw(_thetas),
        rope_scaling=draw(_scalings),
        mask=tuple(draw(_masks)),
    )


# What an implementation's declarations let a program hold (CONF-6, CONF-7) ------------


@dataclass(frozen=True)
class Scope:
    """Where the generated programs may go for one implementation.

    The reference answers every option by its default. Where an implementation
    declares another answer (CONF-6) or lacks a capability (CONF-7), programs stay
    in the region where both answers agree, so a difference is never a
    divergence of policy: no truncate past the length under ``refuse``, no append
    past the capacity under ``grow``, at most one differing field in a refused
    replacement under another check order, no hook toggles under
    ``remints_instance``, no probes differing only in head geometry under
    ``implied``, only the declared schema under ``fixed``, no block expectation of
    an undeclared dtype, and no raw bytes no u64 mix can express without the raw fold.
    """

    truncate_past_length: bool = True
    append_past_capacity: bool = True
    shape_mismatch_fields: int = 3
    hook_toggles: bool = True
    vary_cache_heads: bool = True
    key_schema: Mapping[str, Mapping[str, str]] | None = None
    dtypes: tuple[str, ...] = DTYPES
    raw_bytes: bool = True
    #: Block counts above this are not generated for a reader with narrower counts.
    uint_max: int = U64_MAX

    @classmethod
    def of(cls, info: AdapterInfo) -> Scope:
        default_order = ",".join(SHAPE_FIELDS)
        return cls(
            truncate_past_length=info.option("truncate_past_length") == "noop",
            append_past_capacity=info.option("append_past_capacity") == "refuse",
            shape_mismatch_fields=3 if info.option("replace_layer_order") == default_order else 1,
            hook_toggles=info.option("hook_toggle") == "keeps_instance",
            vary_cache_heads=info.option("plan_key_cache_heads") == "keyed",
            key_schema=info.key_schema,
            dtypes=DTYPES if info.dtypes is None else tuple(d for d in DTYPES if d in info.dtypes),
            raw_bytes=info.raw_fold,
            uint_max=(1 << info.uint_bits) - 1,
        )


def schema_specs(schema: Mapping[str, Mapping[str, str]]) -> st.SearchStrategy[ModelSpec]:
    """Models within a fixed per-family key schema (PLAN-17): its families, fields, hooks."""
    values: dict[str, st.SearchStrategy[Param]] = {
        "u64": st.one_of(st.integers(0, 64), st.sampled_from(U64_EDGES)),
        "f64": param_floats,
        "str": texts,
    }

    @st.composite
    def spec(draw: Draw[Any]) -> ModelSpec:
        family = draw(st.sampled_from(sorted(schema)))
        fields = schema[family]
        params = {
            name: draw(values[kind])
            for name, kind in sorted(fields.items())
            if kind != "hook" and draw(st.booleans())
        }
        hooks = {
            name: draw(st.booleans())
            for name, kind in sorted(fields.items())
            if kind == "hook" and draw(st.booleans())
        }
        return ModelSpec(family, tuple(params.items()), tuple(hooks.items()))

    return spec()


# The key-side program ---------------------------------------------------------------


@dataclass
class _Model:
    spec: ModelSpec
    #: A hook was toggled in place. Such a model is never reloaded: whether a reload
    #: starts from the configuration or from the current hook state is a point no
    #: requirement settles, so the generated checks do not compare it.
    toggled: bool = False


@dataclass
class _Cache:
    geometry: Geometry
    #: The length the specification gives the cache (used only to aim appends and truncations).
    length: int = 0


@dataclass
class _Session:
    model: str
    cache: str
    step_tokens: int


@dataclass
class _KeyBuilder:
    """One program under construction and what is live in it."""

    draw: Draw[Any]
    plan: bool
    scope: Scope = field(default_factory=Scope)
    ops: list[ops.Op] = field(default_factory=list)
    models: dict[str, _Model] = field(default_factory=dict)
    caches: dict[str, _Cache] = field(default_factory=dict)
    sessions: dict[str, _Session] = field(default_factory=dict)
    keys: list[PlanIdentity] = field(default_factory=list)
    serial: int = 0

    def fresh(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial}"

    def pick(self, names: dict[str, T]) -> str:
        return self.draw(st.sampled_from(sorted(names, key=_handle_order)))

    def rules(self) -> list[Callable[[], None]]:
        """Every rule, in a fixed order whatever is live (so a step means the same thing
        after shrinking deleted an earlier one); a rule whose preconditions fail adds nothing.
        Rules listed twice are drawn twice as often."""
        rules: list[Callable[[], None]] = [
            self.new_model,
            self.new_cache,
            self.append,
            self.append,
            self.truncate,
            self.truncate,
            self.alloc_id,
            self.alloc_id,
            self.instance_id,
            self.instance_id,
            self.cache_len,
            self.clear,
            self.replace_layer,
            self.replace_layer,
            self.reload_model,
            self.set_hook,
            self.set_hook,
            self.drop_model,
            self.drop_cache,
            self.story_restore,
        ]
        if self.plan:
            rules += [
                self.new_session,
                self.check,
                self.check,
                self.check,
                self.drop_session,
                self.plan_key,
                self.plan_key,
                self.story_rewind,
                self.story_rebuild,
                self.story_hooks,
            ]
        return rules

    def maybe_read(self, handle: str) -> None:
        """Sometimes read a handle's id right after an operation that may (or must not) mint."""
        if self.draw(st.integers(0, 2)) != 0:
            self.read(handle)

    def read(self, handle: str) -> None:
        """Read a handle's id; done after every operation that must mint (as the scenario
        compiler does), since a counter starting at 0 shows only on the first mint."""
        if handle in self.models:
            self.ops.append(ops.ModelInstanceId(model=handle))
        elif handle in self.caches:
            self.ops.append(ops.CacheAllocId(cache=handle))

    def epilogue(self) -> None:
        """Read every live model's and cache's id, and every cache's length (no choices)."""
        for name in sorted(self.models, key=_handle_order):
            self.ops.append(ops.ModelInstanceId(model=name))
        for name in sorted(self.caches, key=_handle_order):
            self.ops.append(ops.CacheAllocId(cache=name))
            self.ops.append(ops.CacheLen(cache=name))

    # models

    def model_spec(self) -> ModelSpec:
        schema = self.scope.key_schema
        return self.draw(model_specs if schema is None else schema_specs(schema))

    def geometry(self) -> Geometry:
        return self.draw(geometries)

    def new_model(self) -> None:
        self.add_model(self.model_spec())

    def reload_model(self) -> None:
        untouched = {n: m for n, m in self.models.items() if not m.toggled}
        if not untouched:
            return
        self.reload_from(self.pick(untouched))

    def set_hook(self) -> None:
        if not self.scope.hook_toggles or not any(m.spec.hooks for m in self.models.values()):
            return
        name = self.draw(
            st.sampled_from(
                sorted((n for n, m in self.models.items() if m.spec.hooks), key=_handle_order)
            )
        )
        hook = self.draw(st.sampled_from([h for h, _ in self.models[name].spec.hooks]))
        self.models[name].toggled = True
        self.ops.append(ops.ModelSetHook(model=name, hook=hook, present=self.draw(st.booleans())))
        self.maybe_read(name)

    def instance_id(self) -> None:
        if not self.models:
            return
        self.ops.append(ops.ModelInstanceId(model=self.pick(self.models)))

    def drop_model(self) -> None:
        if self.models:
            self.drop(self.pick(self.models))

    # caches

    def new_cache(self) -> None:
        self.add_cache(self.geometry())

    def append(self) -> None:
        if self.caches:
            self.append_to(self.pick(self.caches))

    def truncate(self) -> None:
        if self.caches:
            self.truncate_to(self.pick(self.caches))

    def clear(self) -> None:
        if not self.caches:
            return
        name = self.pick(self.caches)
        self.caches[name].length = 0
        self.ops.append(ops.CacheClear(cache=name))
        self.read(name)

    def replace_layer(self) -> None:
        if self.caches:
            self.replace_in(self.pick(self.caches), fits=self.draw(st.booleans()))

    def replace_in(self, name: str, fits: bool) -> None:
        """Replace a layer: one that fits, or maybe out of range or of another shape."""
        g = self.caches[name].geometry

        # Under another declared check order, at most one field may differ (ALLOC-17).
        changeable = set(SHAPE_FIELDS)
        if not fits and self.scope.shape_mismatch_fields < len(SHAPE_FIELDS):
            changeable = {self.draw(st.sampled_from(SHAPE_FIELDS))}

        def shape(field_name: str, own: int) -> int | None:
            if fits or field_name not in changeable:
                return self.draw(st.sampled_from((None, own)))
            return self.draw(st.one_of(st.none(), st.just(own), st.integers(1, own + 3)))

        layer = self.draw(
            st.integers(0, g.n_layers - 1)
            if fits
            else st.one_of(st.integers(0, g.n_layers - 1), st.integers(g.n_layers, g.n_layers + 2))
        )
        self.ops.append(
            ops.CacheReplaceLayer(
                cache=name,
                layer=layer,
                n_kv_heads=shape("n_kv_heads", g.n_kv_heads),
                head_dim=shape("head_dim", g.head_dim),
                max_seq_len=shape("max_seq_len", g.max_seq_len),
            )
        )
        self.maybe_read(name)

    def alloc_id(self) -> None:
        if not self.caches:
            return
        self.ops.append(ops.CacheAllocId(cache=self.pick(self.caches)))

    def cache_len(self) -> None:
        if not self.caches:
            return
        self.ops.append(ops.CacheLen(cache=self.pick(self.caches)))

    def drop_cache(self) -> None:
        if self.caches:
            self.drop(self.pick(self.caches))

    # plans

    def new_session(self) -> None:
        if not (self.models and self.caches):
            return
        self.session_on(self.pick(self.models), self.pick(self.caches))

    def session_on(self, model: str, cache: str) -> str:
        name = self.fresh("s")
        step_tokens = self.draw(st.integers(1, 3))
        self.sessions[name] = _Session(model, cache, step_tokens)
        self.ops.append(
            ops.SessionNew(handle=name, model=model, cache=cache, step_tokens=step_tokens)
        )
        return name

    def check_with(self, session: str, model: str, cache: str) -> None:
        step = step_inputs(self.draw, self.sessions[session].step_tokens)
        self.ops.append(ops.SessionValid(session=session, model=model, cache=cache, step=step))

    def check(self) -> None:
        if not (self.sessions and self.models and self.caches):
            return
        name = self.pick(self.sessions)
        session = self.sessions[name]
        own = self.draw(st.integers(0, 3)) < 3  # mostly the plan's own model and cache
        model = session.model if own and session.model in self.models else None
        cache = session.cache if own and session.cache in self.caches else None
        self.check_with(name, model or self.pick(self.models), cache or self.pick(self.caches))

    # stories: short sequences real engines run, with random parts

    def story_rewind(self) -> None:
        """A plan, its cache grown and rewound (speculative decoding), the plan checked."""
        if not (self.models and self.caches):
            return
        model, cache = self.pick(self.models), self.pick(self.caches)
        session = self.session_on(model, cache)
        for _ in range(self.draw(st.integers(1, 3))):
            self.draw(st.sampled_from((self.append_to, self.truncate_to)))(cache)
            if self.draw(st.booleans()):
                self.check_with(session, model, cache)
        self.check_with(session, model, cache)

    def story_rebuild(self) -> None:
        """A plan, its model and/or cache dropped and built again alike, the plan checked
        against the new ones (the slot-pooling and reload stories, PLAN-14)."""
        if not (self.models and self.caches):
            return
        model, cache = self.pick(self.models), self.pick(self.caches)
        session = self.session_on(model, cache)
        which = self.draw(st.sampled_from(("model", "cache", "both", "reload")))
        if which == "reload" and self.models[model].toggled:
            which = "model"
        if which == "reload":
            model = self.reload_from(model)
        if which in ("model", "both"):
            spec = self.models[model].spec
            self.drop(model)
            model = self.add_model(spec)
        if which in ("cache", "both"):
            geometry = self.caches[cache].geometry
            self.drop(cache)
            cache = self.add_cache(geometry)
        self.check_with(session, model, cache)

    def story_hooks(self) -> None:
        """A plan, its model's hook toggled and restored, the plan checked each time (PLAN-18)."""
        with_hooks = [n for n, m in self.models.items() if m.spec.hooks]
        if not (with_hooks and self.caches and self.scope.hook_toggles):
            return
        model = self.draw(st.sampled_from(sorted(with_hooks, key=_handle_order)))
        cache = self.pick(self.caches)
        session = self.session_on(model, cache)
        hook, initially = self.draw(st.sampled_from(self.models[model].spec.hooks))
        self.models[model].toggled = True
        for present in (not initially, initially):
            self.ops.append(ops.ModelSetHook(model=model, hook=hook, present=present))
            self.maybe_read(model)
            self.check_with(session, model, cache)

    def story_restore(self) -> None:
        """A layer restored from an offload tier: a plan on a cache, the cache grown, one
        layer replaced in place, its length read and the plan checked (ALLOC-4, ALLOC-11,
        PLAN-10)."""
        if not self.caches:
            return
        cache = self.pick(self.caches)
        model = self.pick(self.models) if self.models else None
        session = self.session_on(model, cache) if model and self.plan else None
        self.append_to(cache)
        self.replace_in(cache, fits=True)
        self.ops.append(ops.CacheLen(cache=cache))
        if session is not None and model is not None:
            self.check_with(session, model, cache)

    def drop(self, handle: str) -> None:
        self.maybe_read(handle)
        self.models.pop(handle, None)
        self.caches.pop(handle, None)
        self.sessions.pop(handle, None)
        self.ops.append(ops.Drop(handle=handle))

    def add_model(self, spec: ModelSpec) -> str:
        name = self.fresh("m")
        self.models[name] = _Model(spec)
        self.ops.append(ops.ModelNew(handle=name, spec=spec))
        self.read(name)
        return name

    def add_cache(self, geometry: Geometry) -> str:
        name = self.fresh("c")
        self.caches[name] = _Cache(geometry)
        self.ops.append(ops.CacheNew(handle=name, geometry=geometry))
        self.read(name)
        return name

    def reload_from(self, source: str) -> str:
        name = self.fresh("m")
        self.models[name] = _Model(self.models[source].spec)
        self.ops.append(ops.ModelReload(model=source, handle=name))
        self.read(name)
        return name

    def append_to(self, name: str) -> None:
        cache = self.caches[name]
        room = cache.geometry.max_seq_len - cache.length
        if room < 1 and not self.scope.append_past_capacity:
            return
        past = (st.integers(room + 1, room + 3),) if self.scope.append_past_capacity else ()
        tokens = max(1, self.draw(st.one_of(st.integers(1, max(1, room)), *past)))
        if cache.length + tokens <= cache.geometry.max_seq_len:
            cache.length += tokens
        self.ops.append(ops.CacheAppend(cache=name, tokens=tokens))
        self.maybe_read(name)

    def truncate_to(self, name: str) -> None:
        cache = self.caches[name]
        past = 3 if self.scope.truncate_past_length else 0
        length = self.draw(st.integers(0, cache.length + past))
        cache.length = min(cache.length, length)
        self.ops.append(ops.CacheTruncate(cache=name, length=length))
        self.maybe_read(name)

    def drop_session(self) -> None:
        if self.sessions:
            self.drop(self.pick(self.sessions))

    def plan_key(self) -> None:
        """A probe: a base identity (new, or one probed before) and 1-3 variations of it."""
        if self.keys and self.draw(st.booleans()):
            base = self.draw(st.sampled_from(self.keys))
        else:
            base = PlanIdentity(
                model=self.model_spec(),
                instance=self.draw(ids),
                alloc=self.draw(ids),
                geometry=self.geometry(),
                step_tokens=self.draw(st.integers(1, 3)),
            )
            self.probe(base)
        for _ in range(self.draw(st.integers(1, 3))):
            for identity in vary_identity(self.draw, base):
                self.probe(identity)

    def probe(self, identity: PlanIdentity) -> None:
        scope = self.scope
        if not scope.vary_cache_heads:  # PLAN-15 `implied`: heads never tell two probes apart
            identity = dataclasses.replace(
                identity, geometry=dataclasses.replace(identity.geometry, n_kv_heads=1, head_dim=1)
            )
        if scope.key_schema is not None and outside_schema(identity.model, scope.key_schema, ""):
            return
        self.keys.append(identity)
        self.ops.append(ops.PlanKey(identity=identity))


def _handle_order(name: str) -> tuple[int, str]:
    return (int(name[1:]), name) if name[1:].isdigit() else (0, name)


#: Explicit id values for plan-key probes (any u64 of at least 1).
ids: st.SearchStrategy[int] = st.one_of(
    st.sampled_from((1, 2, 3, 1 << 32, 1 << 63, U64_MAX)), st.integers(1, U64_MAX)
)


#: Parameter values that encode to the same bytes without their type name:
#: u64(0), f64(+0.0) and str("") are eight zero bytes; u64(bits(x)) and f64(x) agree;
#: and the same number as u64, f64 and str.
_RETYPED: tuple[tuple[Param, Param], ...] = (
    (0, 0.0),
    (0, ""),
    (0.0, ""),
    (0x3FF0_0000_0000_0000, 1.0),
    (0x4040_0000_0000_0000, 32.0),
    (32, 32.0),
    (32, "32"),
)


def _other(value: int, not_this: int) -> int:
    """``value``, moved off ``not_this`` (a draw that must differ, without a filter)."""
    return value if value != not_this else (value + 1 if value < U64_MAX else value - 1)


def vary_identity(draw: Draw[Any], base: PlanIdentity) -> list[PlanIdentity]:
    """``base`` with one component changed, or written differently but equal (then the key
    must not change): the probe of PLAN-16 (under-keying) and of over-keying on form.

    Usually one identity; a retyped parameter gives the two members of a pair whose
    encodings coincide without the type name.
    """
    what = draw(
        st.sampled_from(
            (
                "same",
                "family",
                "param",
                "float-sign",
                "retype",
                "hook",
                "rename-hook",
                "reorder",
                "instance",
                "alloc",
                "geometry",
                "dtype",
                "step",
            )
        )
    )
    model, g = base.model, base.geometry
    params, hooks = dict(model.params), dict(model.hooks)

    def with_model(**changes: Any) -> list[PlanIdentity]:
        return [replace(base, model=replace(model, **changes))]

    if what == "family":
        return with_model(family=draw(st.sampled_from(_FAMILIES)))
    if what == "param":
        name = draw(st.sampled_from(_PARAM_NAMES))
        if name in params and draw(st.booleans()):
            del params[name]
        else:
            params[name] = draw(param_values)
        return with_model(params=tuple(params.items()))
    if what == "float-sign":  # only the sign bit differs (PLAN-16)
        floats = [n for n, v in params.items() if isinstance(v, float) and not math.isnan(v)]
        if floats:
            name = draw(st.sampled_from(floats))
            params[name] = -params[name]  # type: ignore[operator]
        else:
            params[draw(st.sampled_from(_PARAM_NAMES))] = draw(st.sampled_from((0.0, -0.0)))
        return with_model(params=tuple(params.items()))
    if what == "retype":  # the same bytes but another type: untyped, these keys collide
        a, b = draw(st.sampled_from(_RETYPED))
        name = draw(st.sampled_from(_PARAM_NAMES))
        return [with_model(params=tuple({**params, name: v}.items()))[0] for v in (a, b)]
    if what == "hook":
        name = draw(st.sampled_from(_HOOK_NAMES))
        hooks[name] = not hooks.get(name, draw(st.booleans()))
        return with_model(hooks=tuple(hooks.items()))
    if what == "rename-hook":  # the same presence under another name
        old = draw(st.sampled_from(sorted(hooks))) if hooks else None
        free = [h for h in _HOOK_NAMES if h not in hooks]
        if not free:  # every name taken: rename onto a name no list holds
            free = [f"{old}_renamed"]
        present = hooks.pop(old) if old is not None else draw(st.booleans())
        hooks[draw(st.sampled_from(free))] = present
        return with_model(hooks=tuple(hooks.items()))
    if what == "reorder":  # the same parameters and hooks listed in another order
        return with_model(params=tuple(reversed(model.params)), hooks=tuple(reversed(model.hooks)))
    if what == "instance":
        return [replace(base, instance=_other(draw(ids), base.instance))]
    if what == "alloc":
        return [replace(base, alloc=_other(draw(ids), base.alloc))]
    if what == "geometry":
        name = draw(st.sampled_from(("n_layers", "n_kv_heads", "head_dim", "max_seq_len")))
        old_value = getattr(g, name)
        return [
            replace(base, geometry=replace(g, **{name: _other(draw(st.integers(1, 9)), old_value)}))
        ]
    if what == "dtype":
        return [
            replace(
                base,
                geometry=replace(
                    g, dtype=draw(st.sampled_from([d for d in DTYPES if d != g.dtype]))
                ),
            )
        ]
    if what == "step":
        return [replace(base, step_tokens=draw(st.integers(1, 4)))]
    return [base]


@st.composite
def _next_step(draw: Draw[Any], builder: _KeyBuilder) -> bool:
    """Add one operation (``True``), or end the program (``False``).

    One step is one Hypothesis span, so shrinking can delete a step whole.
    """
    # The flag is drawn even for the first step (which always happens), so that
    # every step has the same layout and deleting one leaves the next intact.
    if draw(st.integers(0, 39)) == 0 and builder.ops:
        return False
    builder.draw = draw
    draw(st.sampled_from(builder.rules()))()
    return True


@st.composite
def key_programs(
    draw: Draw[Any], plan: bool = True, max_ops: int = 60, scope: Scope | None = None
) -> Program:
    """A program over models, caches and (with ``plan``) held plans and key probes."""
    builder = _KeyBuilder(draw, plan, scope or Scope())
    while len(builder.ops) < max_ops and draw(_next_step(builder)):
        pass
    builder.epilogue()
    return tuple(builder.ops)


# Hash programs -------------------------------------------------------------------------

mix_ops: st.SearchStrategy[MixOp] = st.one_of(
    st.builds(lambda v: MixOp("u64", v), u64s),
    st.builds(lambda s: MixOp("str", s), texts),
    st.builds(lambda b, r: MixOp("bytes", b, r), st.binary(max_size=16), st.integers(1, 3)),
    st.builds(lambda v: MixOp("f64", v), f64_patterns),
    st.builds(lambda v: MixOp("present", v), st.booleans()),
    st.builds(lambda v: MixOp("instance", v), u64s),
    st.just(MixOp("finish")),
    st.builds(
        lambda b, r: MixOp("bytes", b, r), st.binary(min_size=1, max_size=32), st.integers(2, 1000)
    ),
)

#: One mix program; it always ends with a finish, and may finish mid-way too.
hash_program: st.SearchStrategy[tuple[MixOp, ...]] = st.lists(mix_ops, max_size=10).map(
    lambda mixes: (*mixes, MixOp("finish"))
)


def hash_programs(max_programs: int = 6, scope: Scope | None = None) -> st.SearchStrategy[Program]:
    """Several mix programs, one ``hash`` operation each (one ``hash_batch`` over stdio).

    Without the raw fold (HASH-14), raw bytes whose length is a multiple of eight are
    mixed as the u64s that fold the same bytes, and other raw bytes are left out.
    """
    public = scope is not None and not scope.raw_bytes
    return st.lists(hash_program, min_size=1, max_size=max_programs).map(
        lambda programs: tuple(ops.Hash(program=_without_raw(p) if public else p) for p in programs)
    )


def _without_raw(program: tuple[MixOp, ...]) -> tuple[MixOp, ...]:
    """``program`` with raw bytes as u64 mixes where they can be, and left out elsewhere."""
    return tuple(m for mix in program for m in (as_u64_mixes(mix, 64) or ()))


# Blocks: payloads, stamps, expectations ---------------------------------------------------

_BLOCK_MODELS = ("llama-3-8b", "Llama-3-8B", "mistral-7b", "", "模型-ä", "𝄞")
#: Stamp and expectation dtypes: the vocabulary and names outside it (SIG-14).
_LYING_DTYPES = ("f16", "bf16", "F32", "F32", "f64")
_FORMAT_LIES = (0, 2, 99)


@dataclass(frozen=True)
class Block:
    """A coherent block's truth: the payload it had and the signature measuring it gives."""

    layers: tuple[LayerDesc, ...]
    truth: Signature


@st.composite
def coherent_blocks(draw: Draw[Any]) -> Block:
    model = draw(st.one_of(st.sampled_from(_BLOCK_MODELS), texts))
    n_layers, heads, dim = draw(st.integers(1, 6)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    tokens = draw(st.integers(0, 5))
    size = heads * dim * tokens
    layer = LayerDesc(heads, dim, tokens, size, size)
    return Block((layer,) * n_layers, Signature(1, model, n_layers, heads, dim, "f32", tokens))


def payload_fault(
    draw: Draw[Any], layers: list[LayerDesc], last: int | None = None
) -> tuple[list[LayerDesc], int | None]:
    """One fault in a payload; returns the layers and the index of the layer it touched.

    Faults: a layer added or dropped, or every layer gone; a layer's shape
    changed (its buffers resized to match, or not), or transposed to the same
    width, or given a zero dimension; its depth changed consistently; k or v cut
    or extended (by elements, or both by whole tokens); a false ``seq_len``. A fault often hits
    the layer the previous one hit, so faults combine within one layer too.
    """
    kind = draw(
        st.sampled_from(
            (
                "seq_len",
                "k_len",
                "v_len",
                "tokens",
                "shape",
                "transpose",
                "depth",
                "add",
                "drop",
                "empty",
                "zero",
            )
        )
    )
    layers = list(layers)
    if kind == "empty":  # every layer gone: a block that can vouch for nothing (SIG-5)
        return [], None
    if kind == "add" or not layers:
        if layers and draw(st.booleans()):
            extra = draw(st.sampled_from(layers))
        else:
            h, d, t = draw(st.integers(0, 4)), draw(st.integers(0, 4)), draw(st.integers(0, 5))
            extra = LayerDesc(h, d, t, h * d * t, h * d * t)
        at = draw(st.integers(0, len(layers)))
        layers.insert(at, extra)
        return layers, at
    if last is not None and last < len(layers) and draw(st.booleans()):
        index = last
    else:
        index = draw(st.integers(0, len(layers) - 1))
    layer = layers[index]
    per_token = max(1, layer.n_kv_heads * layer.head_dim)
    if kind == "drop":
        del layers[index]
        return layers, None
    if kind == "seq_len":
        layers[index] = replace(layer, seq_len=draw(st.integers(0, 8)))
    elif kind in ("k_len", "v_len"):
        delta = _other(draw(st.integers(-per_token - 1, per_token + 1)), 0)
        layers[index] = replace(layer, **{kind: max(0, getattr(layer, kind) + delta)})
    elif kind == "tokens":  # whole tokens cut from or added to k and v; the claim kept
        size = (
            layer.n_kv_heads
            * layer.head_dim
            * max(0, layer.seq_len + _other(draw(st.integers(-2, 2)), 0))
        )
        layers[index] = replace(layer, k_len=size, v_len=size)
    elif kind == "depth":  # another token count, told consistently
        tokens = draw(st.integers(0, 6))
        size = layer.n_kv_heads * layer.head_dim * tokens
        layers[index] = replace(layer, seq_len=tokens, k_len=size, v_len=size)
    elif kind == "zero":  # a degenerate layer: no heads or a zero head_dim, buffers kept
        which = draw(st.sampled_from(("n_kv_heads", "head_dim")))
        layers[index] = replace(layer, **{which: 0})
    elif kind == "transpose":  # the same width, another shape
        layers[index] = replace(layer, n_kv_heads=layer.head_dim, head_dim=layer.n_kv_heads)
    else:
        heads = draw(st.one_of(st.just(layer.n_kv_heads), st.just(0), st.integers(0, 5)))
        dim = draw(st.one_of(st.just(layer.head_dim), st.just(0), st.integers(0, 5)))
        if draw(st.booleans()):  # buffers resized to the new shape, or left as they were
            size = heads * dim * layer.seq_len
            layers[index] = LayerDesc(heads, dim, layer.seq_len, size, size)
        else:
            layers[index] = replace(layer, n_kv_heads=heads, head_dim=dim)
    return layers, index


def faulty_payload(draw: Draw[Any], block: Block, max_faults: int) -> tuple[LayerDesc, ...]:
    layers, last = list(block.layers), None
    for _ in range(draw(st.integers(0, max_faults))):
        layers, last = payload_fault(draw, layers, last)
    return tuple(layers)


def lie(draw: Draw[Any], sig: Signature, fields: int) -> Signature:
    """``sig`` with up to ``fields`` fields changed: the stamp lying, or another expectation.

    As many single changes as double ones: a change behind an earlier one in the
    comparison order is masked, so the field a check is about must often be alone.
    """
    count = draw(st.integers(0, fields))
    names = draw(
        st.lists(
            st.sampled_from(
                (
                    "tokens",
                    "n_layers",
                    "n_kv_heads",
                    "head_dim",
                    "dtype",
                    "model",
                    "format_version",
                    "transpose",
                )
            ),
            min_size=count,
            max_size=count,
            unique=True,
        )
    )
    changes: dict[str, object] = {}
    for name in names:
        if name == "transpose":  # heads and head_dim swapped: the same width
            changes.update(n_kv_heads=sig.head_dim, head_dim=sig.n_kv_heads)
            continue
        value = getattr(sig, name)
        if name == "format_version":
            changes[name] = draw(st.sampled_from(_FORMAT_LIES))
        elif name == "dtype":
            changes[name] = draw(st.sampled_from(_LYING_DTYPES))
        elif name == "model":
            changes[name] = draw(
                st.sampled_from(
                    (
                        value.swapcase(),
                        value.upper(),
                        value + " ",
                        "",
                        "other-model",
                    )
                )
            )
        else:
            changes[name] = max(0, value + draw(st.sampled_from((1, -1, 2, 7))))
    return replace(sig, **changes)


def respell(draw: Draw[Any], sig: Signature) -> Signature:
    """``sig`` with its model or dtype spelled otherwise: the same to a person, not a byte."""
    if draw(st.booleans()):
        model = draw(
            st.sampled_from(
                (
                    sig.model.upper(),
                    sig.model.swapcase(),
                    sig.model + " ",
                    " " + sig.model,
                    sig.model.title(),
                )
            )
        )
        return replace(sig, model=model)
    return replace(
        sig, dtype=draw(st.sampled_from((sig.dtype.upper(), " " + sig.dtype, sig.dtype + "\x00")))
    )


@st.composite
def verify_ops(draw: Draw[Any]) -> ops.Verify:
    """One verification, in one of several shapes so that each check is reached often:
    an honest stamp and payload read by another expectation (compatibility, VERIFY-5);
    a lying stamp over an honest payload (honesty, VERIFY-4), possibly equal to the
    expectation; a faulty payload (coherence, SIG-7..9); the stamp equal to the
    expectation over a payload that differs (VERIFY-4's "even when"); a model or
    dtype spelled otherwise (compared byte for byte, SIG-3 and SIG-14); a stamp of
    an unreadable format over a payload that may be broken (VERIFY-3 before
    coherence); anything at all.
    """
    block = draw(coherent_blocks())
    truth = block.truth
    mode = draw(
        st.sampled_from(
            (
                "honest",
                "lying",
                "faulty",
                "stamp-is-expected",
                "respelled",
                "unreadable",
                "free",
            )
        )
    )
    payload = block.layers
    if mode == "unreadable":  # another format's stamp over a payload that may be broken
        payload = faulty_payload(draw, block, 2)
        recorded = replace(truth, format_version=draw(st.sampled_from(_FORMAT_LIES)))
        expected = draw(st.sampled_from((truth, recorded)))
    elif mode == "respelled":  # one field spelled otherwise, in the stamp or the expectation
        other = respell(draw, truth)
        recorded, expected = draw(st.sampled_from(((other, truth), (truth, other))))
    elif mode == "honest":
        recorded, expected = truth, lie(draw, truth, 2)
    elif mode == "lying":
        recorded = lie(draw, truth, 2)
        expected = draw(st.sampled_from((truth, recorded)))
    elif mode == "faulty":  # the stamp honest, or with one lie the order must put first
        payload = faulty_payload(draw, block, 3)
        recorded = draw(st.sampled_from((truth, lie(draw, truth, 1))))
        expected = draw(st.sampled_from((truth, lie(draw, truth, 1))))
    elif mode == "stamp-is-expected":
        payload = faulty_payload(draw, block, 2)
        recorded = lie(draw, truth, 1)
        expected = recorded
    else:
        payload = faulty_payload(draw, block, 3)
        recorded = None if draw(st.integers(0, 9)) == 0 else lie(draw, truth, 3)
        expected = lie(draw, truth, 3)
    return ops.Verify(recorded=recorded, payload=payload, expected=expected)


@st.composite
def measuring_ops(draw: Draw[Any]) -> ops.Op:
    block = draw(coherent_blocks())
    payload = faulty_payload(draw, block, 3)
    cls = draw(st.sampled_from((ops.Measure, ops.Stamp)))
    return cls(model=block.truth.model, payload=payload)


def block_programs(
    verify: bool = True, signature: bool = True, scope: Scope | None = None
) -> st.SearchStrategy[Program]:
    """Independent verify, measure and stamp operations (only the classes given).

    A reader that declares its dtypes (SIG-14) is never handed an expectation of
    another dtype: that is its own requirement, which it could not even hold.
    """
    choices = ([verify_ops(), verify_ops()] if verify else []) + (
        [measuring_ops()] if signature else []
    )
    if not choices:
        raise ValueError("block_programs needs verify or signature")
    one = st.one_of(*choices)
    if scope is not None and scope.uint_max < U64_MAX:
        one = one.filter(lambda op: _counts_within(op, scope.uint_max))
    programs = st.lists(one, min_size=1, max_size=6).map(tuple)
    if scope is None or scope.dtypes == DTYPES:
        return programs
    return programs.map(lambda p: _expectations_within(p, scope.dtypes))


def _counts_within(op: ops.Op, limit: int) -> bool:
    """No count of the payload, the stamp or the expectation above ``limit`` (SIG-14)."""
    payload = getattr(op, "payload", ())
    sigs = [s for s in (getattr(op, "recorded", None), getattr(op, "expected", None)) if s]
    return all(
        max(layer.n_kv_heads, layer.head_dim, layer.seq_len, layer.k_len, layer.v_len) <= limit
        for layer in payload
    ) and all(max(s.n_layers, s.n_kv_heads, s.head_dim, s.tokens) <= limit for s in sigs)


def _expectations_within(program: Program, dtypes: tuple[str, ...]) -> Program:
    return tuple(
        dataclasses.replace(op, expected=dataclasses.replace(op.expected, dtype="f32"))
        if isinstance(op, ops.Verify) and op.expected.dtype not in dtypes
        else op
        for op in program
    )
