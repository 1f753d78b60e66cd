"""What each config field declares beside itself, and the one checker that enforces it.

A field is declared with :func:`setting` (it has a base default), :func:`owner_setting` (no default: the
owner YAMLs must supply it) or :func:`derived` (computed by the composer, never overridden). Its
:class:`Spec` carries the one-line docstring, the unit and the bounds; its annotation carries the type:
``int``, ``float``, ``bool``, ``str``, a ``Literal`` of choices or a ``list`` of those, each optionally
``| None``. :func:`check_section` walks a section instance and raises :class:`ConfigError` naming the
first field that breaks its declaration. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import math
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, dataclass_transform

from omegaconf import MISSING  # the marker of a value no layer has set yet

T = TypeVar("T")
SPEC_KEY = "soakbench.spec"


class ConfigError(ValueError):
    """A user-facing configuration error; the CLI prints it and exits with code 2.

    ``key`` is the dotted setting the message is about, when there is one."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class FrozenSettingError(dataclasses.FrozenInstanceError):
    """Assignment to a field of a composed config."""


@dataclass(frozen=True)
class Interval:
    """Allowed numeric range; ``None`` leaves that side unbounded."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def contains(self, value: float) -> bool:
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def describe(self, integer: bool) -> str:
        """``1..16``, ``>= 2``, ``a positive integer``, ``(0.0, 1.0]``, ``> 1e-08`` ..."""
        low, high = self.low, self.high
        if low is not None and high is not None:
            if integer and not (self.low_open or self.high_open):
                return f"{low}..{high}"
            return f"{'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"
        if low is not None:
            if integer and low == 1 and not self.low_open:
                return "a positive integer"
            return f"{'>' if self.low_open else '>='} {low}"
        if high is not None:
            return f"{'<' if self.high_open else '<='} {high}"
        return "any value"


def at_least(low: float) -> Interval:
    return Interval(low=low)


def above(low: float) -> Interval:
    return Interval(low=low, low_open=True)


def closed(low: float, high: float) -> Interval:
    return Interval(low=low, high=high)


def open_interval(low: float, high: float) -> Interval:
    return Interval(low=low, high=high, low_open=True, high_open=True)


def left_open(low: float, high: float) -> Interval:
    """(low, high]: excludes ``low``, includes ``high``."""
    return Interval(low=low, high=high, low_open=True)


@dataclass(frozen=True)
class Spec:
    """Field metadata: docstring, unit and bounds.

    ``bounds`` apply to a number or to every item of a list; ``items`` is (min, max) list length."""

    doc: str
    unit: str | None = None
    bounds: Interval | None = None
    items: tuple[int, int | None] = (0, None)
    absolute_path: bool = False


def setting(
    *,
    default: T,
    doc: str,
    unit: str | None = None,
    bounds: Interval | None = None,
    absolute_path: bool = False,
) -> T:
    """A field with a base default that owner YAMLs and overrides may change."""
    spec = Spec(doc, unit, bounds, absolute_path=absolute_path)
    return field(default=default, metadata={SPEC_KEY: spec})


def owner_setting(
    *,
    doc: str,
    unit: str | None = None,
    bounds: Interval | None = None,
    items: tuple[int, int | None] = (0, None),
) -> Any:  # typed by the annotation it is assigned to, like dataclasses.field
    """A field without a base default: the owner YAMLs must set it (composition fails closed otherwise)."""
    spec = Spec(doc, unit, bounds, items)
    return field(default=MISSING, metadata={SPEC_KEY: spec})


def derived(*, doc: str, unit: str | None = None) -> Any:  # typed by its annotation, like dataclasses.field
    """A field the composer computes; not a setting, never overridden."""
    return field(metadata={SPEC_KEY: Spec(doc, unit)})


@dataclass_transform(
    frozen_default=True, kw_only_default=True, field_specifiers=(field, setting, owner_setting, derived)
)
def section(cls: type[T]) -> type[T]:
    """A frozen, keyword-only dataclass whose assignment error says the config is read-only."""
    out = dataclass(frozen=True, kw_only=True)(cls)

    def refuse(self: object, name: str, value: object = None) -> None:
        raise FrozenSettingError(
            f"cannot assign to field {name!r}: the composed config is read-only; compose a new one "
            "with overrides instead"
        )

    # The frozen dataclass's own error ("cannot assign to field") does not say why.
    out.__setattr__ = refuse  # type: ignore[method-assign]  # replacing the generated method is the point
    out.__delattr__ = refuse  # type: ignore[method-assign]
    return out


@dataclass(frozen=True)
class FieldType:
    """A field annotation reduced to what the checker needs."""

    base: type | None  # int, float, bool, str or a section dataclass; None for a Literal
    choices: tuple[object, ...] | None
    nullable: bool
    item: FieldType | None = None  # element type of a list


def type_hints(cls: type) -> dict[str, Any]:
    """``cls``'s resolved annotations (the sections use postponed evaluation)."""
    return typing.get_type_hints(cls)


def field_type(hint: Any) -> FieldType:
    """Reduce ``int | None``, ``Literal[...]``, ``list[int]`` ... to a :class:`FieldType`."""
    nullable = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(hint))
        if len(args) != 1:
            raise TypeError(f"unsupported config annotation {hint!r}")
        hint = args[0]
    origin = typing.get_origin(hint)
    if origin is Literal:
        return FieldType(None, typing.get_args(hint), nullable)
    if origin is list:
        (item,) = typing.get_args(hint)
        return FieldType(list, None, nullable, field_type(item))
    if hint in (int, float, bool, str) or dataclasses.is_dataclass(hint):
        return FieldType(hint, None, nullable)
    raise TypeError(f"unsupported config annotation {hint!r}")


def spec_of(f: dataclasses.Field[Any]) -> Spec:
    spec = f.metadata.get(SPEC_KEY)
    if not isinstance(spec, Spec):
        raise TypeError(
            f"config field {f.name!r} is declared without setting(), owner_setting() or derived()"
        )
    return spec


def check_section(section_obj: object, prefix: str = "", written: Mapping[str, object] | None = None) -> None:
    """Check every field of ``section_obj`` (a section dataclass instance), nested sections included.

    ``written`` maps dotted keys to the values as a layer spelled them (``2`` where the field holds
    ``2.0``), so that a refusal quotes the user's own value."""
    hints = type_hints(type(section_obj))
    for f in dataclasses.fields(section_obj):  # type: ignore[arg-type]  # any section instance
        key = f"{prefix}{f.name}"
        value = getattr(section_obj, f.name)
        if dataclasses.is_dataclass(value):
            check_section(value, f"{key}.", written)
        else:
            shown = written[key] if written is not None and key in written else value
            check_value(key, field_type(hints[f.name]), spec_of(f), shown)


def check_value(key: str, kind: FieldType, spec: Spec, value: object) -> None:
    """Raise ConfigError unless ``value`` is of ``kind`` and within ``spec``."""
    if value is None:
        if not kind.nullable:
            raise ConfigError(f"{key} must be {expected(kind, spec)}, got null", key)
    elif kind.base is list:
        _check_list(key, kind, spec, value)
    else:
        _check_scalar(key, kind, spec, value)


def _check_scalar(key: str, kind: FieldType, spec: Spec, value: object) -> None:
    if kind.choices is not None:
        if not any(type(value) is type(c) and value == c for c in kind.choices):
            allowed = ", ".join(["null"] * kind.nullable + [str(c) for c in kind.choices])
            raise ConfigError(f"{key}={value!r} is not allowed; allowed: {allowed}", key)
        return
    if not _is_instance(value, kind.base):
        raise ConfigError(f"{key} must be {expected(kind, spec)}, got {value!r}", key)
    if isinstance(value, float) and not math.isfinite(value):
        finite = "null or a finite number" if kind.nullable else "a finite number"
        raise ConfigError(f"{key} must be {finite}, got {value!r}", key)
    if spec.bounds is not None and isinstance(value, int | float) and not spec.bounds.contains(value):
        allowed = ("null or " if kind.nullable else "") + spec.bounds.describe(kind.base is int)
        raise ConfigError(f"{key}={value} is out of range; allowed: {allowed}", key)
    if spec.absolute_path and not os.path.isabs(str(value)):
        raise ConfigError(f"{key} must be an absolute path, got {value!r}", key)


def _check_list(key: str, kind: FieldType, spec: Spec, value: object) -> None:
    assert kind.item is not None
    least, most = spec.items
    item_spec = dataclasses.replace(spec, items=(0, None))
    ok = isinstance(value, list) and least <= len(value) and (most is None or len(value) <= most)
    if ok:
        try:
            for item in value:  # type: ignore[attr-defined]  # a list, checked above
                check_value(key, kind.item, item_spec, item)
        except ConfigError:
            ok = False
    if not ok:
        raise ConfigError(f"{key} must be {expected(kind, spec)}, got {value!r}", key)


def _is_instance(value: object, base: type | None) -> bool:
    if base is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if base is float:
        return isinstance(value, int | float)
    return base is not None and isinstance(value, base)


_NOUNS = {
    int: ("an integer", "integers"),
    float: ("a number", "numbers"),
    bool: ("true or false", "booleans"),
}


def expected(kind: FieldType, spec: Spec) -> str:
    """What the field accepts, in words: ``null or a finite number``, ``a non-empty list of integers >= 1``."""
    if kind.choices is not None:
        text = " | ".join(str(c) for c in kind.choices)
    elif kind.base is list:
        text = _expected_list(kind, spec)
    elif kind.base is str:
        text = "an absolute path" if spec.absolute_path else "a string"
    elif kind.base is float and kind.nullable:
        return "null or a finite number"
    elif dataclasses.is_dataclass(kind.base):
        text = "a mapping of settings"
    else:
        text = _NOUNS[kind.base][0] if kind.base in _NOUNS else "a value"
    return f"null or {text}" if kind.nullable else text


def _expected_list(kind: FieldType, spec: Spec) -> str:
    assert kind.item is not None
    least, most = spec.items
    plural = _NOUNS[kind.item.base][1] if kind.item.base in _NOUNS else "strings"
    sizes = {least: f"a list of {least}"} if least == most else {1: "a non-empty list of"}
    size = sizes.get(least, "a list of")
    bound = ""
    if spec.bounds is not None:
        b = spec.bounds
        bound = (
            f" >= {b.low}"
            if b.high is None and not b.low_open
            else f" in {b.describe(kind.item.base is int)}"
        )
    return f"{size} {plural}{bound}"
