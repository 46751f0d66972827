"""The verbs of decode plans: sessions, their validity questions, and plan keys."""

from __future__ import annotations

from kvconform.harness.checks import Refuses, Validity, ValueIs, ValueRef, Where
from kvconform.harness.steps.compiler import _Args, _Iter
from kvconform.harness.steps.hashing import _unmixable_in_key
from kvconform.harness.steps.identity import _IdentityVerbs
from kvconform.harness.yamlsource import PathKey
from kvconform.protocol import operations as ops
from kvconform.values import PlanIdentity, StepInputs


class _PlanVerbs(_IdentityVerbs):
    """Sessions and plan keys (a plan key's model and geometry are read as a model's and
    a cache's are)."""

    def _v_session_new(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        model = self._handle(args["model"], "model", (*at, "model"))
        cache = self._handle(args["cache"], "cache", (*at, "cache"))
        step_tokens = args.get("step_tokens", 1)
        self._bind_handle(args["as"], "session", (*at, "as"), it)
        self.scope.sessions[args["as"]] = step_tokens
        self._emit(
            ops.SessionNew(handle=args["as"], model=model, cache=cache, step_tokens=step_tokens),
            where,
        )

    def _v_session_valid(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        session, model, cache, step = self._session_question(args, at)
        op = ops.SessionValid(session=session, model=model, cache=cache, step=step)
        self._emit(op, where, Validity(args["expect"] == "valid"))

    def _v_session_validity(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        session, model, cache, step = self._session_question(args, at)
        op = ops.SessionValidity(session=session, model=model, cache=cache, step=step)
        self._emit(op, where, ValueIs(args["expect"]))

    def _session_question(self, args: _Args, at: PathKey) -> tuple[str, str, str, StepInputs]:
        session = self._handle(args["session"], "session", (*at, "session"))
        model = self._handle(args["model"], "model", (*at, "model"))
        cache = self._handle(args["cache"], "cache", (*at, "cache"))
        raw = args.get("step", {})
        rope = raw.get("rope", {})
        step = StepInputs(
            token_ids=tuple(raw.get("token_ids", [1] * self.scope.sessions[session])),
            write_offset=raw.get("write_offset", 0),
            rope_theta=float(rope.get("theta", 10000.0)),
            rope_scaling=None if rope.get("scaling") is None else float(rope["scaling"]),
            mask=tuple(raw.get("mask", [])),
        )
        return session, model, cache, step

    def _v_plan_key(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        base = None
        if "like" in args:
            base = self.scope.keys.get(args["like"])
            if base is None:
                raise self._fail((*at, "like"), f"no plan_key named {args['like']!r}")
        model = self._model_spec(args, at, base.model if base else None)
        for name in ("instance", "alloc"):
            if name not in args and base is None:
                raise self._fail(at, f"missing {name} (or 'like')")
        identity = PlanIdentity(
            model=model,
            instance=args.get("instance", base.instance if base else 0),
            alloc=args.get("alloc", base.alloc if base else 0),
            geometry=self._geometry(args, at, base.geometry if base else None),
            step_tokens=args.get("step_tokens", base.step_tokens if base else 1),
        )
        probe = bool(args.get("expect_refusal"))
        self._admissible(probe, _unmixable_in_key(identity), at)
        index = self._emit(ops.PlanKey(identity=identity), where, Refuses() if probe else None)
        if probe:
            if "as" in args:
                raise self._fail((*at, "as"), "a probe that must be refused yields no key to name")
            return
        if "as" not in args:
            raise self._fail(at, "plan_key needs 'as'")
        self._bind_value(args["as"], ValueRef(args["as"], index), (*at, "as"), it)
        self.scope.keys[args["as"]] = identity
