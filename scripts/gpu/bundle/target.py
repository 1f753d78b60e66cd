"""The interpreter and platform a bundle is for: PEP 508 markers evaluated for it, and whether a
wheel's tags install on it. Standard library only, Python >= 3.11."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from bundle.files import BundleError, WheelName, normalize, platform_glibc


@dataclass(frozen=True)
class Target:
    """The interpreter and platform the bundle is for."""

    python_version: str  # "3.12" or "3.12.4"
    machine: str = "x86_64"
    max_glibc: tuple[int, int] = (2, 28)

    @property
    def minor(self) -> tuple[int, int]:
        major, minor = self.python_version.split(".")[:2]
        return int(major), int(minor)

    @property
    def cp_tag(self) -> str:
        return f"cp{self.minor[0]}{self.minor[1]}"

    def marker_env(self) -> dict[str, str]:
        parts = self.python_version.split(".")
        full = ".".join([*parts, "0"]) if len(parts) == 2 else self.python_version
        return {
            "python_version": ".".join(parts[:2]),
            "python_full_version": full,
            "sys_platform": "linux",
            "platform_system": "Linux",
            "platform_machine": self.machine,
            "platform_python_implementation": "CPython",
            "implementation_name": "cpython",
            "os_name": "posix",
        }


def parse_python_version(text: str) -> str:
    if not re.fullmatch(r"3\.\d{1,2}(\.\d{1,2})?", text):
        raise BundleError(f"--python-version must look like 3.12 or 3.12.4, got {text!r}")
    return text


def parse_glibc(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)\.(\d+)", text)
    if not match:
        raise BundleError(f"--max-glibc must look like 2.28, got {text!r}")
    return int(match.group(1)), int(match.group(2))


_TOKEN = re.compile(r"\s*(\(|\)|'[^']*'|\"[^\"]*\"|[A-Za-z_][A-Za-z0-9_.]*|===|==|!=|<=|>=|<|>)")


def _tokens(marker: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(marker):
        if marker[pos:].strip() == "":
            break
        match = _TOKEN.match(marker, pos)
        if match is None:
            raise BundleError(f"cannot parse marker {marker!r} at {marker[pos:]!r}")
        out.append(match.group(1))
        pos = match.end()
    return out


def _version_tuple(text: str) -> tuple[int, ...]:
    if not re.fullmatch(r"\d+(\.\d+)*", text):
        raise BundleError(f"marker version {text!r} is not a plain release number")
    return tuple(int(p) for p in text.split("."))


def _compare(var: str, left: str, op: str, right: str) -> bool:
    if var in ("python_version", "python_full_version"):
        if op in ("==", "!=") and right.endswith(".*"):
            prefix = _version_tuple(right[:-2])
            hit = _version_tuple(left)[: len(prefix)] == prefix
            return hit if op == "==" else not hit
        a, b = _version_tuple(left), _version_tuple(right)
        width = max(len(a), len(b))
        a, b = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
        table = {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}
        if op not in table:
            raise BundleError(f"unsupported marker operator {op!r} for {var}")
        return table[op]
    if op == "==":
        return left == right
    if op == "!=":
        return left != right
    raise BundleError(f"unsupported marker operator {op!r} for {var}")


class _MarkerParser:
    """Recursive descent over the marker grammar uv writes: or / and / parentheses / ``a op b``."""

    def __init__(self, marker: str, env: Mapping[str, str], extras: frozenset[str]) -> None:
        self.marker, self.env, self.extras = marker, env, extras
        self.tokens = _tokens(marker)
        self.pos = 0

    def parse(self) -> bool:
        result = self.disjunction()
        if self.pos != len(self.tokens):
            raise BundleError(f"trailing text in marker {self.marker!r}: {' '.join(self.tokens[self.pos :])}")
        return result

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        if self.pos >= len(self.tokens):
            raise BundleError(f"marker {self.marker!r} ends early")
        self.pos += 1
        return self.tokens[self.pos - 1]

    def value(self, tok: str) -> tuple[str, str | None]:
        """(value, variable name or None for a literal)."""
        if tok[0] in "'\"":
            return tok[1:-1], None
        if tok == "extra":
            return "", "extra"
        if tok not in self.env:
            raise BundleError(f"marker {self.marker!r} uses {tok!r}, which this tool does not evaluate")
        return self.env[tok], tok

    def atom(self) -> bool:
        tok = self.take()
        if tok == "(":
            result = self.disjunction()
            if self.take() != ")":
                raise BundleError(f"unbalanced parentheses in marker {self.marker!r}")
            return result
        left, lvar = self.value(tok)
        op = self.take()
        if op == "not":
            if self.take() != "in":
                raise BundleError(f"bad operator in marker {self.marker!r}")
            op = "not in"
        right, rvar = self.value(self.take())
        return self.compare(left, lvar, op, right, rvar)

    def compare(self, left: str, lvar: str | None, op: str, right: str, rvar: str | None) -> bool:
        var = lvar or rvar or ""
        if var == "extra":
            if op not in ("==", "!="):
                raise BundleError(f"unsupported operator {op!r} on extra in marker {self.marker!r}")
            hit = normalize(right if lvar else left) in self.extras
            return hit if op == "==" else not hit
        if op in ("in", "not in"):
            hit = left in right
            return hit if op == "in" else not hit
        return _compare(var, left, op, right) if lvar else _compare(var, right, _flip(op), left)

    def conjunction(self) -> bool:
        result = self.atom()
        while self.peek() == "and":
            self.take()
            result = self.atom() and result
        return result

    def disjunction(self) -> bool:
        result = self.conjunction()
        while self.peek() == "or":
            self.take()
            result = self.conjunction() or result
        return result


def marker_holds(marker: str, env: Mapping[str, str], extras: frozenset[str] = frozenset()) -> bool:
    """Evaluate a PEP 508 marker of the shapes uv writes (and/or, parentheses, ``var op 'value'``)."""
    return _MarkerParser(marker, env, extras).parse()


def _flip(op: str) -> str:
    return {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)


def _platform_ok(tag: str, target: Target) -> bool:
    glibc = platform_glibc(tag)
    if glibc is None:
        return False
    return (tag == "any" or tag.endswith("_" + target.machine)) and glibc <= target.max_glibc


def wheel_fits(wheel: WheelName, target: Target) -> bool:
    """True when the wheel installs on the target (CPython, Linux glibc <= max_glibc, the machine)."""
    major, minor = target.minor
    py_ok = any(
        t in (target.cp_tag, f"py{major}", f"py{major}{minor}")
        or (t.startswith("cp3") and t[2:].isdigit() and "abi3" in wheel.abi_tags and int(t[3:]) <= minor)
        for t in wheel.python_tags
    )
    abi_ok = any(t in (target.cp_tag, "abi3", "none") for t in wheel.abi_tags)
    return py_ok and abi_ok and any(_platform_ok(t, target) for t in wheel.platform_tags)
