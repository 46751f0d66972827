"""PLAN mutants: a validity key that leaves out something baked (under-keying) or
puts in something bound (over-keying), and predicates that misbehave around it.

Key mutants flip one switch of :class:`~._kit.Composition`, the reference
composition; over-keying mutants mix one per-step input or the cache length
after it. Both are checked through held plans (``new_session``/``check``)
and through the ``plan_key`` probe.
"""

from __future__ import annotations

from dataclasses import replace

from kvconform_reference import kv_cache, model, plan
from kvconform_reference.hasher import KeyHasher

from . import mutant
from ._kit import REFERENCE_COMPOSITION, Composition, KeyedPlan, PlanAdapter

# --- under-keying: PLAN-15, PLAN-16, PLAN-9 .. PLAN-18 --------------------------


@mutant(
    "plan-key-ignores-alloc",
    breaks=("PLAN-15", "PLAN-10", "ALLOC-2"),
    half="under",
    plausible="the plan is handed the cache at every call, so 'it reads whatever cache it "
    "is given' -- but a held plan reads the buffers it captured (the slot-pooling bug)",
)
class PlanKeyIgnoresAlloc(PlanAdapter):
    composition = replace(REFERENCE_COMPOSITION, alloc=False)


@mutant(
    "plan-key-ignores-instance",
    breaks=("PLAN-15", "PLAN-8", "PLAN-9"),
    half="under",
    plausible="family and structural parameters describe the graph completely -- except "
    "for the weight constants it baked, which only the instance id stands for",
)
class PlanKeyIgnoresInstance(PlanAdapter):
    composition = replace(REFERENCE_COMPOSITION, instance=False)


@mutant(
    "plan-key-ignores-hooks",
    breaks=("PLAN-15", "PLAN-18"),
    half="under",
    plausible="hooks are runtime callbacks, not 'structure', so they are left out; but an "
    "attached hook adds ops to the graph the plan baked",
)
class PlanKeyIgnoresHooks(PlanAdapter):
    composition = replace(REFERENCE_COMPOSITION, hooks=False)


class _HookValuesOnly(Composition):
    def key(self, ident: plan.PlanIdentity, extra: object = None) -> int:  # type: ignore[override]
        unnamed = dict(enumerate(ident.hooks[name] for name in sorted(ident.hooks)))
        # MUTATION: only the presence bits are mixed, not which hook they belong to
        renamed = replace(ident, hooks={f"hook{i}": on for i, on in unnamed.items()})
        return super().key(renamed)


@mutant(
    "plan-key-ignores-hook-names",
    breaks=("PLAN-15", "PLAN-16"),
    half="under",
    plausible="mixing 'how many hooks are on' (a bitmask over the hook list) looks "
    "enough; a model with a logit hook then keys like one with a sampling hook",
)
class PlanKeyIgnoresHookNames(PlanAdapter):
    composition = _HookValuesOnly()


@mutant(
    "plan-key-ignores-family",
    breaks=("PLAN-15", "PLAN-16"),
    half="under",
    plausible="the seed's first predicate was pure geometry: Qwen3 and Llama at the same "
    "dimensions then key alike although they build different graphs",
)
class PlanKeyIgnoresFamily(PlanAdapter):
    composition = replace(REFERENCE_COMPOSITION, family=False)


@mutant(
    "plan-key-ignores-step-tokens",
    breaks=("PLAN-15", "PLAN-4"),
    half="under",
    plausible="token count is 'per-step input' like the token values; but a one-token "
    "decode graph cannot run a four-token verify batch",
)
class PlanKeyIgnoresStepTokens(PlanAdapter):
    composition = replace(REFERENCE_COMPOSITION, step_tokens=False)


@mutant(
    "plan-key-ignores-max-seq-len",
    breaks=("PLAN-15", "PLAN-16"),
    half="under",
    plausible="capacity looks like a limit rather than a shape, so only heads, head_dim "
    "and layers are keyed; the buffers' baked shapes include it",
)
class PlanKeyIgnoresMaxSeqLen(PlanAdapter):
    composition = replace(
        REFERENCE_COMPOSITION, geometry=("n_layers", "n_kv_heads", "head_dim", "dtype")
    )


@mutant(
    "plan-key-ignores-dtype",
    breaks=("PLAN-15", "PLAN-16"),
    half="under",
    plausible="only f32 caches exist today, so the element type 'cannot differ'; an f16 "
    "cache of the same shape then runs an f32 plan",
)
class PlanKeyIgnoresDtype(PlanAdapter):
    composition = replace(
        REFERENCE_COMPOSITION, geometry=("n_layers", "n_kv_heads", "head_dim", "max_seq_len")
    )


@mutant(
    "plan-key-ignores-float-sign",
    breaks=("PLAN-16", "HASH-6"),
    half="under",
    plausible="a structural float is a magnitude (an epsilon, a scale), so abs() looks "
    "like a harmless normalization; PLAN-16 names the sign bit explicitly",
)
class PlanKeyIgnoresFloatSign(PlanAdapter):
    composition = replace(REFERENCE_COMPOSITION, float_mix=lambda h, x: h.mix_f64(abs(x)))


@mutant(
    "plan-key-float-truncated",
    breaks=("PLAN-15", "PLAN-16"),
    half="under",
    plausible="'structural parameters are integers' (layers, heads, sizes); a float such "
    "as rms_norm_eps mixed through int() keys 1e-5 like 1e-6",
)
class PlanKeyFloatTruncated(PlanAdapter):
    composition = replace(REFERENCE_COMPOSITION, float_mix=lambda h, x: h.mix_u64(int(x)))


@mutant(
    "plan-key-params-untyped",
    breaks=("PLAN-16",),
    half="under",
    plausible="the primitives are self-delimiting, so the type name looks redundant; but "
    "u64(0), f64(+0.0) and str('') are the same eight zero bytes",
)
class PlanKeyParamsUntyped(PlanAdapter):
    composition = replace(REFERENCE_COMPOSITION, type_params=False)


@mutant(
    "plan-key-params-uncounted",
    breaks=("PLAN-16",),
    half="under",
    plausible="every parameter carries its type name and every string its length, so the "
    "count before the list looks redundant (a Java adapter written from the documents left "
    "it out); but a u64 value and a string's trailing length are both eight bytes, and a "
    "string can end with the encoding of a parameter that follows it",
)
class PlanKeyParamsUncounted(PlanAdapter):
    composition = replace(REFERENCE_COMPOSITION, count_params=False)


@mutant(
    "plan-key-hooks-uncounted",
    breaks=("PLAN-16",),
    half="under",
    plausible="the parameter list is counted and every hook entry ends with 'some' or "
    "'none', so a count before the hooks looks redundant; but a parameter whose name ends "
    "with another's encoding can take the first hook's place",
)
class PlanKeyHooksUncounted(PlanAdapter):
    composition = replace(REFERENCE_COMPOSITION, count_hooks=False)


@mutant(
    "plan-key-string-values-undelimited",
    breaks=("PLAN-15", "PLAN-16", "HASH-5"),
    half="under",
    plausible="the type name before a value looks like delimiter enough, so a string "
    "value is folded as its bytes alone (the SGLang 24638 pattern); then one value can "
    "carry the bytes of the next parameter's name and type, and two maps collide",
)
class PlanKeyStringValuesUndelimited(PlanAdapter):
    composition = replace(REFERENCE_COMPOSITION, delimit_str_values=False)


_LOW_32 = (1 << 32) - 1


@mutant(
    "plan-key-instance-in-32-bits",
    breaks=("PLAN-16", "HASH-8"),
    half="under",
    plausible="the key struct holds the instance id in a uint32_t (or JavaScript's "
    "'>>> 0'): ids are small in every test, and instance 5 and 2^32 + 5 key alike",
)
class PlanKeyInstanceIn32Bits(PlanAdapter):
    composition = replace(REFERENCE_COMPOSITION, instance_mask=_LOW_32)


@mutant(
    "plan-key-alloc-in-32-bits",
    breaks=("PLAN-16", "PLAN-15"),
    half="under",
    plausible="the allocation id is stored in a 32-bit field of the plan record; a "
    "long-lived server passes 2^32 allocations, and allocation 5 and 2^32 + 5 key alike",
)
class PlanKeyAllocIn32Bits(PlanAdapter):
    composition = replace(REFERENCE_COMPOSITION, alloc_mask=_LOW_32)


@mutant(
    "plan-key-capacity-in-32-bits",
    breaks=("PLAN-16", "PLAN-15"),
    half="under",
    plausible="the cache capacity is a uint32_t in the key record (no context is 4 billion "
    "positions long); a probe of capacity 2^32 + 16 then keys like 16",
)
class PlanKeyCapacityIn32Bits(PlanAdapter):
    composition = replace(REFERENCE_COMPOSITION, capacity=lambda n: n & _LOW_32)


@mutant(
    "plan-key-capacity-read-through-a-double",
    breaks=("PLAN-16", "PROTO-17"),
    half="under",
    plausible="the adapter's JSON reader holds every number as a double (JSON.parse, many "
    "C++ readers); counts above 2^53 round, and capacities 2^53 and 2^53 + 1 key alike",
)
class PlanKeyCapacityReadThroughADouble(PlanAdapter):
    composition = replace(REFERENCE_COMPOSITION, capacity=lambda n: int(float(n)))


def _ids_xored(h: KeyHasher, ident: plan.PlanIdentity) -> None:
    h.mix_u64(ident.instance ^ ident.alloc)  # MUTATION: one u64 for both ids


class _IdsCombined(Composition):
    def key(self, ident: plan.PlanIdentity, extra: object = None) -> int:  # type: ignore[override]
        # the reference's own composition without the two ids (Composition.key: this
        # class's key would call itself), then the one word for both
        plain = replace(self, instance=False, alloc=False)
        return Composition.key(plain, ident, lambda h: _ids_xored(h, ident))


@mutant(
    "plan-key-ids-combined-by-xor",
    breaks=("PLAN-16",),
    half="under",
    plausible="folding the two ids into one word ('the plan's identity') keeps the key "
    "small; instance 3 over allocation 5 then keys like instance 5 over allocation 3",
)
class PlanKeyIdsCombinedByXor(PlanAdapter):
    composition = _IdsCombined()


@mutant(
    "plan-key-geometry-only",
    breaks=("PLAN-15", "PLAN-9", "PLAN-10"),
    half="under",
    plausible="the seed's own predicate before its identity module: (seq, max_seq_len, "
    "n_layers, dtype) -- sufficient while one model shape drove the path",
)
class PlanKeyGeometryOnly(PlanAdapter):
    composition = Composition(
        family=False,
        count_params=False,
        hooks=False,
        instance=False,
        alloc=False,
        geometry=("n_layers", "max_seq_len", "dtype"),
    )

    def key(
        self, ident: plan.PlanIdentity, cache: kv_cache.KvCache | None, step: plan.StepInputs
    ) -> int:
        return self.composition.key(replace(ident, params={}))


# --- over-keying: PLAN-3, PLAN-6, PLAN-7 --------------------------------------


@mutant(
    "plan-key-params-in-listed-order",
    breaks=("PLAN-3",),
    half="over",
    plausible="iterating the config dict as given is the obvious loop; two listings of the "
    "same parameters then key differently and the plan is rebuilt",
)
class PlanKeyParamsInListedOrder(PlanAdapter):
    composition = replace(REFERENCE_COMPOSITION, sort_params=False)


@mutant(
    "plan-key-includes-token-ids",
    breaks=("PLAN-6", "PLAN-4"),
    half="over",
    plausible="'the plan ran on these inputs' -- hashing the whole step input is the "
    "cautious choice; every generated token then rebuilds the plan",
)
class PlanKeyIncludesTokenIds(PlanAdapter):
    def key(
        self, ident: plan.PlanIdentity, cache: kv_cache.KvCache | None, step: plan.StepInputs
    ) -> int:
        def tokens(h: KeyHasher) -> None:
            for token in step.token_ids:  # MUTATION
                h.mix_u64(token)

        return self.composition.key(ident, tokens)


@mutant(
    "plan-key-includes-write-offset",
    breaks=("PLAN-6", "PLAN-7"),
    half="over",
    plausible="the KV write position looks like part of 'where the plan writes'; it is "
    "rebound per step, and keying on it rebuilds the plan every token",
)
class PlanKeyIncludesWriteOffset(PlanAdapter):
    def key(
        self, ident: plan.PlanIdentity, cache: kv_cache.KvCache | None, step: plan.StepInputs
    ) -> int:
        return self.composition.key(ident, lambda h: h.mix_u64(step.write_offset))  # MUTATION


def _mix_rope(h: KeyHasher, rope: plan.RopeSpec) -> None:
    h.mix_f64(rope.theta)  # MUTATION: RoPE base and scaling keyed
    if rope.scaling is None:
        h.mix_present(False)
    else:
        h.mix_present(True).mix_f64(rope.scaling)


@mutant(
    "plan-key-includes-rope",
    breaks=("PLAN-6",),
    half="over",
    plausible="'rope differs, so it must be in the key' -- the instinct the seed warns "
    "about; Llama 3.1's scaled frequencies reach the plan through per-step tables",
)
class PlanKeyIncludesRope(PlanAdapter):
    def key(
        self, ident: plan.PlanIdentity, cache: kv_cache.KvCache | None, step: plan.StepInputs
    ) -> int:
        return self.composition.key(ident, lambda h: _mix_rope(h, step.rope))


@mutant(
    "plan-key-includes-mask",
    breaks=("PLAN-6",),
    half="over",
    plausible="the mask policy is structural, and keying the mask tensor itself looks "
    "like the same thing; its values are refilled every step",
)
class PlanKeyIncludesMask(PlanAdapter):
    def key(
        self, ident: plan.PlanIdentity, cache: kv_cache.KvCache | None, step: plan.StepInputs
    ) -> int:
        def mask(h: KeyHasher) -> None:
            h.mix_u64(len(step.mask))  # MUTATION
            for value in step.mask:
                h.mix_u64(value)

        return self.composition.key(ident, mask)


@mutant(
    "plan-key-includes-cache-length",
    breaks=("PLAN-7", "ALLOC-5", "ALLOC-7"),
    half="over",
    plausible="the seed's original key had 'seq' in it; the length only moves the write "
    "offset, and keying it breaks reuse on every token and every rejected draft",
)
class PlanKeyIncludesCacheLength(PlanAdapter):
    def key(
        self, ident: plan.PlanIdentity, cache: kv_cache.KvCache | None, step: plan.StepInputs
    ) -> int:
        if cache is None:  # the plan_key probe has no cache
            return self.composition.key(ident)
        return self.composition.key(ident, lambda h: h.mix_u64(len(cache)))  # MUTATION


# --- the predicate: PLAN-4, PLAN-13 -------------------------------------------


class _KeyedOnFirstUse(KeyedPlan):
    def __init__(
        self, key_fn: object, m: model.Model, cache: kv_cache.KvCache, step_tokens: int
    ) -> None:
        self._key_fn = key_fn  # type: ignore[assignment]
        self.step_tokens = step_tokens
        self.key = None  # type: ignore[assignment]  # MUTATION: nothing recorded at build

    def is_valid_for(self, m: model.Model, cache: kv_cache.KvCache, step: plan.StepInputs) -> bool:
        if self.key is None:  # the first run records what it runs on
            self.key = self._key_fn(
                plan.PlanIdentity.of(m, cache, len(step.token_ids)), cache, step
            )
        return super().is_valid_for(m, cache, step)


@mutant(
    "plan-key-recorded-at-first-check",
    breaks=("PLAN-1", "PLAN-9", "PLAN-10"),
    half="under",
    plausible="building lazily -- the plan is traced on its first run, so its key is "
    "recorded then; whatever model and cache it is first asked about become 'its own'",
)
class PlanKeyRecordedAtFirstCheck(PlanAdapter):
    def session_new(
        self, m: model.Model, cache: kv_cache.KvCache, step_tokens: int
    ) -> plan.DecodePlan:
        return _KeyedOnFirstUse(self.key, m, cache, step_tokens)


class _NeedsRoom(KeyedPlan):
    def is_valid_for(self, m: model.Model, cache: kv_cache.KvCache, step: plan.StepInputs) -> bool:
        if len(cache) + len(step.token_ids) > cache.geometry.max_seq_len:
            return False  # MUTATION: "the step does not fit" taken as "the plan is stale"
        return super().is_valid_for(m, cache, step)


@mutant(
    "plan-valid-refuses-a-full-cache",
    breaks=("PLAN-4", "PLAN-7"),
    half="over",
    plausible="folding a capacity check into the validity predicate ('can this plan run "
    "here?'): a full cache then invalidates a plan its key still matches, and the engine "
    "rebuilds instead of refusing the append",
)
class PlanValidRefusesAFullCache(PlanAdapter):
    def session_new(
        self, m: model.Model, cache: kv_cache.KvCache, step_tokens: int
    ) -> plan.DecodePlan:
        return _NeedsRoom(self.key, m, cache, step_tokens)


class _BuildWidth(KeyedPlan):
    def is_valid_for(self, m: model.Model, cache: kv_cache.KvCache, step: plan.StepInputs) -> bool:
        ident = plan.PlanIdentity.of(m, cache, self.step_tokens)  # MUTATION: own width
        return self._key_fn(ident, cache, step) == self.key


@mutant(
    "plan-check-uses-its-own-width",
    breaks=("PLAN-4", "PLAN-15"),
    half="under",
    plausible="the plan knows how many tokens it was built for, so the check recomputes "
    "the key with that number instead of counting the step's tokens",
)
class PlanCheckUsesItsOwnWidth(PlanAdapter):
    def session_new(
        self, m: model.Model, cache: kv_cache.KvCache, step_tokens: int
    ) -> plan.DecodePlan:
        return _BuildWidth(self.key, m, cache, step_tokens)


class _IdentityComparedWithIs(plan.DecodePlan):
    def __init__(self, m: model.Model, cache: kv_cache.KvCache, step_tokens: int = 1) -> None:
        super().__init__(m, cache, step_tokens)
        self.identity = plan.PlanIdentity.of(m, cache, step_tokens)

    def is_valid_for(self, m: model.Model, cache: kv_cache.KvCache, step: plan.StepInputs) -> bool:
        now = plan.PlanIdentity.of(m, cache, len(step.token_ids))
        return now is self.identity  # MUTATION: identity, not equality


@mutant(
    "plan-always-stale",
    breaks=("PLAN-4", "PLAN-10"),
    half="over",
    plausible="comparing the recorded identity with `is` instead of `==` (or keying on a "
    "fresh object's id) makes every check fail; an always-stale predicate passes every "
    "correctness test while disabling reuse",
)
class PlanAlwaysStale(PlanAdapter):
    def session_new(
        self, m: model.Model, cache: kv_cache.KvCache, step_tokens: int
    ) -> plan.DecodePlan:
        return _IdentityComparedWithIs(m, cache, step_tokens)


class _Rebuilding(KeyedPlan):
    def is_valid_for(self, m: model.Model, cache: kv_cache.KvCache, step: plan.StepInputs) -> bool:
        valid = super().is_valid_for(m, cache, step)
        if not valid:  # MUTATION: a stale plan re-keys itself for what it was asked about
            self.key = self._key_fn(
                plan.PlanIdentity.of(m, cache, len(step.token_ids)), cache, step
            )
        return valid


@mutant(
    "plan-check-rebuilds-in-place",
    breaks=("PLAN-13", "PLAN-10"),
    half="under",
    plausible="'rebuild on miss' folded into the check: the caller rebuilds anyway, so the "
    "plan re-keys itself; the check then changes the plan it judges, and the original "
    "cache no longer matches",
)
class PlanCheckRebuildsInPlace(PlanAdapter):
    def session_new(
        self, m: model.Model, cache: kv_cache.KvCache, step_tokens: int
    ) -> plan.DecodePlan:
        return _Rebuilding(self.key, m, cache, step_tokens)


class _KeepsAlive(KeyedPlan):
    def __init__(
        self, key_fn: object, m: model.Model, cache: kv_cache.KvCache, step_tokens: int
    ) -> None:
        super().__init__(key_fn, m, cache, step_tokens)  # type: ignore[arg-type]
        self.pinned = (m, cache)  # MUTATION: the plan keeps what it was built on alive


@mutant(
    "plan-keeps-model-and-cache-alive",
    breaks=("PLAN-14",),
    half="contract",
    plausible="holding strong references 'so the plan can never see a recycled address' "
    "is the pointer scheme's repair; it hides the release of the model and the cache",
    gap="with never-recycled ids a kept-alive model changes no answer the adapter "
    "interface can give: PLAN-14's 'must not keep them alive' needs a probe of object "
    "lifetime (a weak reference, a release count) that the protocol does not have",
)
class PlanKeepsModelAndCacheAlive(PlanAdapter):
    def session_new(
        self, m: model.Model, cache: kv_cache.KvCache, step_tokens: int
    ) -> plan.DecodePlan:
        return _KeepsAlive(self.key, m, cache, step_tokens)
