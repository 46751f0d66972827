"""The operations of the table no rule of its own writes: each one of a declared class
takes part in the key-side programs from its table entry alone.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from kvconform.differential.strategies.plan_validity import ValidityRules
from kvconform.differential.strategies.source import Source, flag, items
from kvconform.differential.strategies.values import any_text
from kvconform.protocol import operations as ops
from kvconform.protocol.operations import OpSpec

#: Every operation a property's writer draws by a rule of its own: the key-state
#: machine's rules above, the hash programs, the block programs and the prefix programs.
DRAWN_BY_WRITERS = frozenset(
    {
        "model_new",
        "model_reload",
        "model_set_hook",
        "model_instance_id",
        "cache_new",
        "cache_append",
        "cache_truncate",
        "cache_clear",
        "cache_replace_layer",
        "cache_alloc_id",
        "cache_len",
        "drop",
        "session_new",
        "session_valid",
        "plan_key",
        "hash",
        "measure",
        "stamp",
        "verify",
        "prefix_new",
        "tier_new",
        "prefix_attach",
        "lora_load",
        "request_new",
        "request_lora",
        "request_media",
        "request_embeds",
        "prefix_store",
        "prefix_lookup",
    }
)


def _small_count(src: Source) -> int:
    return src.integer(0, 8)


def _count_or_null(src: Source) -> int | None:
    return None if src.integer(0, 2) == 0 else src.integer(0, 8)


def _text_or_null(src: Source) -> str | None:
    return None if src.integer(0, 2) == 0 else any_text(src)


#: How a field of a plain kind is written when an operation has no writer of its own.
_PLAIN_FIELD_WRITERS: dict[str, Callable[[Source], object]] = {
    "count": _small_count,
    "count_or_null": _count_or_null,
    "bool": flag,
    "str": any_text,
    "str_or_null": _text_or_null,
    "str_list": lambda src: tuple(items(src, lambda: any_text(src), 3)),
}


class TableRules(ValidityRules):
    """A rule for every other operation of the table of a declared class."""

    def table_rules(self) -> list[Callable[[], None]]:
        """A rule for each operation of the table the rules above do not write: every
        operation of a declared class that no property's writer draws and whose table
        entry gives no reason not to (``not_generated``), in the table's order.

        An operation with a writer of its own (:data:`_OPERATION_WRITERS`: fields that
        depend on each other or on what is live) is written by it; any other is filled
        field by field from its kinds (:meth:`plain`). So a new operation takes part in
        the generated checks from its table entry alone.
        """
        rules: list[Callable[[], None]] = []
        for spec in ops.TABLE:
            if (
                spec.name in DRAWN_BY_WRITERS
                or spec.not_generated
                or spec.needs not in self.classes
            ):
                continue
            own = _OPERATION_WRITERS.get(spec.name)
            rules.append(
                functools.partial(own, self) if own else functools.partial(self.plain, spec)
            )
        return rules

    def plain(self, spec: OpSpec) -> None:
        """An operation filled from its field kinds: a live handle of the kind each handle
        field names, small counts, flags, texts. Adds nothing when something it needs is
        not live, or when it makes an object whose state the builder follows (a model, a
        cache, a session: their own rules write those)."""
        if spec.makes in ("model", "cache", "session"):
            return
        src = self.src
        values: dict[str, object] = {}
        for f in spec.fields:
            if f.kind == "new_handle":
                values[f.name] = self.fresh(spec.makes[0] if spec.makes else "h")
            elif f.kind in ("handle", "released"):
                pool = self.live(f.name) if f.kind == "handle" else self.all_live()
                if not pool:
                    return
                values[f.name] = self.pick(pool)
            elif f.kind in _PLAIN_FIELD_WRITERS:
                values[f.name] = _PLAIN_FIELD_WRITERS[f.kind](src)
            else:
                return  # a structured field: the operation needs a writer of its own
        op = spec.cls(**values)
        for name in spec.releases:
            self.forget(str(values[name]))
        if spec.makes is not None and spec.binds is not None:
            self.others.setdefault(spec.makes, {})[str(values[spec.binds])] = None
        self.ops.append(op)


#: Writers of table operations whose fields depend on each other or on what is live.
_OPERATION_WRITERS: dict[str, Callable[[ValidityRules], None]] = {
    "cache_new_placed": ValidityRules.placed_cache,
    "session_validity": ValidityRules.validity,
}
