"""The verbs of stored blocks: payloads and signatures defined by name, and the
``measure``, ``stamp`` and ``verify`` operations judged by a signature or an error."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kvconform.harness.checks import Expectation, SignatureIs, ValueRef, Where
from kvconform.harness.steps.compiler import _Args, _CompilerBase, _Iter
from kvconform.harness.yamlsource import PathKey
from kvconform.protocol import operations as ops
from kvconform.values import LayerDesc, Layout, Payload, Signature


class _BlockVerbs(_CompilerBase):
    """Payloads, signatures, and the operations judged by them."""

    def _v_payload(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        self._define(args["as"], (*at, "as"), it)
        self.scope.payloads[args["as"]] = self._payload(args, at)

    def _payload(self, args: Mapping[str, Any], at: PathKey) -> Payload:
        shape = ("n_kv_heads", "head_dim", "tokens")
        if "like" in args:
            base = self.scope.payloads.get(args["like"])
            if base is None:
                raise self._fail((*at, "like"), f"no payload named {args['like']!r}")
            layers = list(base)
            if "n_layers" in args:
                n = args["n_layers"]
                layers = layers[:n] + [layers[-1]] * max(0, n - len(layers)) if layers else []
            overridden = [name for name in shape if name in args]
            if overridden:
                raise self._fail(
                    at, f"with 'like', change {overridden[0]} per layer under 'layers'"
                )
        else:
            needed = ("n_layers", *shape) if args.get("n_layers", 1) else ("n_layers",)
            missing = [name for name in needed if name not in args]
            if missing:
                raise self._fail(at, f"missing {missing[0]} (or 'like')")
            if args["n_layers"] == 0:
                layers = []
            else:
                layer = _layer(args["n_kv_heads"], args["head_dim"], args["tokens"])
                layers = [layer] * args["n_layers"]
        for index, override in enumerate(args.get("layers", [])):
            n = override["layer"]
            if n >= len(layers):
                raise self._fail((*at, "layers", index, "layer"), f"the payload has no layer {n}")
            current = layers[n]
            tokens = current.seq_len  # the layer's own claim, whatever its width
            if any(name in override for name in shape):
                current = _layer(
                    override.get("n_kv_heads", current.n_kv_heads),
                    override.get("head_dim", current.head_dim),
                    override.get("tokens", tokens),
                )
            current = replace(
                current,
                **{
                    k: override[k]
                    for k in ("seq_len", "k_len", "v_len", "v_head_dim")
                    if k in override
                },
            )
            layers[n] = current
        return tuple(layers)

    def _v_signature(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        fields = (
            "format_version",
            "model",
            "n_layers",
            "n_kv_heads",
            "head_dim",
            "dtype",
            "tokens",
        )
        defaults: dict[str, Any] = {"format_version": 1, "dtype": "f32"}
        layout: Layout | None = None
        if "like" in args:
            base = self.scope.signatures.get(args["like"])
            if base is None:
                raise self._fail((*at, "like"), f"no signature named {args['like']!r}")
            defaults = {name: getattr(base, name) for name in fields}
            layout = base.layout
        values = {**defaults, **{k: v for k, v in args.items() if k in fields}}
        missing = [name for name in fields if name not in values]
        if missing:
            raise self._fail(at, f"missing {missing[0]} (or 'like')")
        if "block_size" in args or "sliding_window" in args:
            if "block_size" not in args and layout is None:
                raise self._fail(at, "a layout needs block_size (PROF-5)")
            layout = Layout(
                args.get("block_size", layout.block_size if layout else 0),
                args.get("sliding_window", layout.sliding_window if layout else None),
            )
        self._define(args["as"], (*at, "as"), it)
        self.scope.signatures[args["as"]] = Signature(**values, layout=layout)

    def _signature(self, name: str, path: PathKey) -> Signature:
        sig = self.scope.signatures.get(name)
        if sig is None:
            raise self._fail(path, f"no signature named {name!r}")
        return sig

    def _payload_ref(self, name: str, path: PathKey) -> Payload:
        payload = self.scope.payloads.get(name)
        if payload is None:
            raise self._fail(path, f"no payload named {name!r}")
        return payload

    def _outcome(self, args: Mapping[str, Any], at: PathKey) -> Expectation:
        if ("expect" in args) == ("expect_error" in args):
            raise self._fail(at, "give exactly one of 'expect' (a signature) and 'expect_error'")
        if "expect" in args:
            return SignatureIs(self._signature(args["expect"], (*at, "expect")))
        return self._error(args["expect_error"])

    def _measuring(
        self,
        cls: type[ops.Measure] | type[ops.Stamp],
        args: Mapping[str, Any],
        at: PathKey,
        where: Where,
        it: int | None,
    ) -> None:
        payload = self._payload_ref(args["payload"], (*at, "payload"))
        raw = args.get("layout")
        layout = None if raw is None else Layout(raw["block_size"], raw["sliding_window"])
        index = self._emit(
            cls(model=args["model"], payload=payload, layout=layout),
            where,
            self._outcome(args, at),
        )
        if "as" in args:
            self._bind_value(args["as"], ValueRef(args["as"], index), (*at, "as"), it)

    def _v_measure(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        self._measuring(ops.Measure, args, at, where, it)

    def _v_stamp(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        self._measuring(ops.Stamp, args, at, where, it)

    def _v_verify(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        recorded = args["recorded"]
        op = ops.Verify(
            recorded=None if recorded is None else self._signature(recorded, (*at, "recorded")),
            payload=self._payload_ref(args["payload"], (*at, "payload")),
            expected=self._signature(args["expected"], (*at, "expected")),
        )
        self._emit(op, where, self._outcome(args, at))


def _layer(n_kv_heads: int, head_dim: int, tokens: int) -> LayerDesc:
    length = n_kv_heads * head_dim * tokens
    return LayerDesc(n_kv_heads, head_dim, tokens, length, length)
