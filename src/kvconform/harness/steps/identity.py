"""The verbs of models and caches: making, reloading and hooking models; making,
growing, truncating, clearing and reshaping caches; reading their ids; dropping a
handle."""

from __future__ import annotations

import re
import struct
from collections.abc import Mapping
from typing import Any

from kvconform.harness.checks import (
    ErrorIs,
    Expectation,
    Refuses,
    RelationCheck,
    ShapeMismatchIs,
    ValueIs,
    ValueRef,
    Where,
)
from kvconform.harness.steps.compiler import _Args, _CompilerBase, _Iter
from kvconform.harness.yamlsource import PathKey
from kvconform.protocol import operations as ops
from kvconform.values import SHAPE_FIELDS, Geometry, ModelSpec, Param


class _IdentityVerbs(_CompilerBase):
    """Models and caches."""

    def _model_spec(
        self, args: Mapping[str, Any], at: PathKey, base: ModelSpec | None
    ) -> ModelSpec:
        if base is None and "family" not in args:
            raise self._fail(at, "a model needs a family (or 'like')")
        params = dict(base.params) if base else {}
        for name, raw in args.get("params", {}).items():
            params[name] = self._param(raw, (*at, "params", name))
        hooks = dict(base.hooks) if base else {}
        hooks.update(args.get("hooks", {}))
        return ModelSpec(
            family=args.get("family", base.family if base else ""),
            params=tuple(params.items()),
            hooks=tuple(hooks.items()),
        )

    def _param(self, raw: Any, path: PathKey) -> Param:
        """A structural parameter: u64, binary64 (or its bits, tagged) or string."""
        if isinstance(raw, Mapping):
            if "f64" in raw:
                return float(struct.unpack("<d", int(raw["f64"], 16).to_bytes(8, "little"))[0])
            return str(raw["str"])
        if isinstance(raw, str) and _NUMBERLIKE.fullmatch(raw.strip()):
            raise self._fail(
                path,
                f"{raw!r} reads as a number but YAML made it a string (write 1.0e-5, not 1e-5); "
                "tag it {str: ...} if a string is meant",
            )
        value: Param = raw
        return value

    def _v_model_new(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        base = None
        if "like" in args:
            base = self.scope.models.get(args["like"])
            if base is None:
                raise self._fail((*at, "like"), f"no model named {args['like']!r}")
        spec = self._model_spec(args, at, base)
        self._bind_handle(args["as"], "model", (*at, "as"), it)
        self.scope.models[args["as"]] = spec
        self._emit(ops.ModelNew(handle=args["as"], spec=spec), where)
        self._observe_id(ops.ModelInstanceId(model=args["as"]), where, "ID-1")

    def _v_model_reload(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        model = self._handle(args["model"], "model", (*at, "model"))
        self._bind_handle(args["as"], "model", (*at, "as"), it)
        self.scope.models[args["as"]] = self.scope.models[model]
        self._emit(ops.ModelReload(model=model, handle=args["as"]), where)
        self._observe_id(ops.ModelInstanceId(model=args["as"]), where, "ID-1")

    def _v_model_set_hook(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        model = self._handle(args["model"], "model", (*at, "model"))
        self._emit(ops.ModelSetHook(model=model, hook=args["hook"], present=args["present"]), where)

    def _v_model_instance_id(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        model = self._handle(args["model"], "model", (*at, "model"))
        index = self._emit(ops.ModelInstanceId(model=model), where)
        ref = ValueRef(args["as"], index)
        self._bind_value(args["as"], ref, (*at, "as"), it)
        self.checks.append(RelationCheck(where, "nonzero", (ref,), ("ID-1",)))

    def _geometry(self, args: Mapping[str, Any], at: PathKey, base: Geometry | None) -> Geometry:
        fields = ("n_layers", "n_kv_heads", "head_dim", "max_seq_len")
        values: dict[str, Any] = {"dtype": base.dtype if base else "f32"}
        for name in fields:
            if name in args:
                values[name] = args[name]
            elif base is not None:
                values[name] = getattr(base, name)
            else:
                raise self._fail(at, f"missing {name} (or 'like')")
        if "dtype" in args:
            values["dtype"] = args["dtype"]
        return Geometry(**values)

    def _v_cache_new(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        geometry = self._new_cache_geometry(args, at)
        self._new_cache(ops.CacheNew(handle=args["as"], geometry=geometry), args, at, where, it)

    def _v_cache_new_placed(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        geometry = self._new_cache_geometry(args, at)
        storage = tuple(args["layer_storage"])
        if len(storage) != geometry.n_layers:
            raise self._fail(
                (*at, "layer_storage"), f"give one label per layer ({geometry.n_layers})"
            )
        op = ops.CacheNewPlaced(
            handle=args["as"], geometry=geometry, residency=args["residency"], layer_storage=storage
        )
        self._new_cache(op, args, at, where, it)

    def _new_cache_geometry(self, args: _Args, at: PathKey) -> Geometry:
        base = None
        if "like" in args:
            base = self.scope.caches.get(args["like"])
            if base is None:
                raise self._fail((*at, "like"), f"no cache named {args['like']!r}")
        return self._geometry(args, at, base)

    def _new_cache(
        self,
        op: ops.CacheNew | ops.CacheNewPlaced,
        args: _Args,
        at: PathKey,
        where: Where,
        it: _Iter,
    ) -> None:
        """Bind the cache the operation makes and observe its first allocation id (ALLOC-1)."""
        self._bind_handle(args["as"], "cache", (*at, "as"), it)
        self.scope.caches[args["as"]] = op.geometry
        self._emit(op, where)
        self._observe_id(ops.CacheAllocId(cache=args["as"]), where, "ALLOC-1")

    def _v_cache_append(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        cache = self._handle(args["cache"], "cache", (*at, "cache"))
        if "expect_error" in args and "expect_refusal" in args:
            raise self._fail(at, "give 'expect_error' or 'expect_refusal', not both")
        expect: Expectation | None = None
        if "expect_error" in args:
            expect = self._error(args["expect_error"])
        elif args.get("expect_refusal"):
            expect = Refuses()
        self._emit(ops.CacheAppend(cache=cache, tokens=args["tokens"]), where, expect)

    def _v_cache_truncate(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        cache = self._handle(args["cache"], "cache", (*at, "cache"))
        expect = Refuses() if args.get("expect_refusal") else None
        self._emit(ops.CacheTruncate(cache=cache, length=args["to"]), where, expect)

    def _v_cache_clear(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        """The clear, and later a read of the id it mints (ALLOC-1). Not at once: under
        ``clear_mints: lazy`` reading the id is itself an operation that makes the mint
        happen (ALLOC-18), and a read the scenario did not write would settle the pending
        mint before the steps that judge when it happens. The id is read before the
        cache is dropped or cleared again, or after the last step."""
        cache = self._handle(args["cache"], "cache", (*at, "cache"))
        if cache in self.unread_clears:
            del self.unread_clears[cache]  # the id this clear owes is the one read
        self._emit(ops.CacheClear(cache=cache), where)
        self.unread_clears[cache] = where

    def _v_cache_replace_layer(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        cache = self._handle(args["cache"], "cache", (*at, "cache"))
        expect: Expectation | None = None
        if "expect_error" in args and "expect" in args:
            raise self._fail(at, "give 'expect' or 'expect_error', not both")
        if "expect_error" in args:
            expect = self._error(args["expect_error"])
            if expect.kind == "layer_shape_mismatch":
                expect = self._shape_mismatch(expect, self.scope.caches[cache], args, at)
        op = ops.CacheReplaceLayer(
            cache=cache,
            layer=args["layer"],
            n_kv_heads=args.get("n_kv_heads"),
            head_dim=args.get("head_dim"),
            max_seq_len=args.get("max_seq_len"),
        )
        self._emit(op, where, expect)

    def _shape_mismatch(
        self, stated: ErrorIs, geometry: Geometry, args: _Args, at: PathKey
    ) -> ShapeMismatchIs:
        """Every differing field, so the declared check order picks the reported one (ALLOC-17).

        The scenario states the error under the default order; that statement is
        checked here against the fields the step actually changes.
        """
        differing = tuple(
            (name, getattr(geometry, name), args[name])
            for name in SHAPE_FIELDS
            if name in args and args[name] != getattr(geometry, name)
        )
        if not differing or stated.layer is None:
            raise self._fail((*at, "expect_error"), "no shape field differs from the cache's")
        expect = ShapeMismatchIs(stated.layer, differing)
        if expect.in_order(SHAPE_FIELDS) != stated:
            raise self._fail(
                (*at, "expect_error"),
                f"under the default order the error is {expect.in_order(SHAPE_FIELDS)}",
            )
        return expect

    def _v_cache_alloc_id(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        cache = self._handle(args["cache"], "cache", (*at, "cache"))
        index = self._emit(ops.CacheAllocId(cache=cache), where)
        ref = ValueRef(args["as"], index)
        self._bind_value(args["as"], ref, (*at, "as"), it)
        self.checks.append(RelationCheck(where, "nonzero", (ref,), ("ALLOC-1",)))

    def _v_cache_len(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        cache = self._handle(args["cache"], "cache", (*at, "cache"))
        if "as" not in args and "expect" not in args:
            raise self._fail(at, "cache_len needs 'as' or 'expect'")
        expect = ValueIs(args["expect"]) if "expect" in args else None
        index = self._emit(ops.CacheLen(cache=cache), where, expect)
        if "as" in args:
            self._bind_value(args["as"], ValueRef(args["as"], index), (*at, "as"), it)

    def _v_drop(self, name: str, at: PathKey, where: Where, it: int | None) -> None:
        kind = self.scope.handles.pop(name, None)
        if kind is None:
            raise self._fail(at, f"no live handle named {name!r} to drop")
        if name in self.unread_clears:
            self._read_cleared(name)
        self._emit(ops.Drop(handle=name), where)


_NUMBERLIKE = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|[-+]?(inf|nan)", re.IGNORECASE)
