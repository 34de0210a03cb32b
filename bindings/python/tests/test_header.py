"""The ctypes table cannot drift from the C ABI: ``tether._ffi`` against ``tether.h``.

``_SIGNATURES`` and the ``ctypes.Structure`` classes in ``tether._ffi`` are a hand copy of
``adapters/ffi/include/tether.h`` (cbindgen's output, which ``cargo test -p tether-ffi --test
header`` keeps equal to the Rust sources). This test parses the header and fails on any
difference: a function missing on either side, a different argument count, an argument or
return type ctypes would pass differently, a struct field renamed, reordered, retyped, added
or dropped, and a ``TETHER_*`` constant the package spells with another value.

Integers compare by size and signedness, which is all ctypes sees (``c_size_t`` *is*
``c_uint64`` on LP64). ``c_char_p`` stands for ``const uint8_t *`` (ctypes passes
immutable ``bytes`` through it, so a buffer the library writes must be ``POINTER(c_uint8)``)
and for ``const char *`` (a NUL-terminated string, which is what ``c_char_p`` makes);
``c_void_p`` for a pointer to an opaque handle; ``POINTER(X)`` for a pointer to ``X``, a
Structure ``Foo`` for the header's ``TetherFoo``.

No library is loaded: this reads the package's tables and the header text only.
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Union

import pytest

from tether import _ffi

REPO = Path(__file__).resolve().parents[3]
HEADER = REPO / "adapters" / "ffi" / "include" / "tether.h"


def _inside_the_workspace() -> bool:
    manifest = REPO / "Cargo.toml"
    return manifest.is_file() and '"adapters/ffi"' in manifest.read_text(encoding="utf-8")


def header_text() -> str:
    """The committed header. Inside the workspace a missing header is a failure, not a skip:
    the check must never pass by not running."""
    if not _inside_the_workspace():
        pytest.skip(f"not inside the tether workspace ({REPO}): no tether.h to compare with")
    assert HEADER.is_file(), f"{HEADER} is missing: the ctypes table cannot be checked"
    return HEADER.read_text(encoding="utf-8")


# ----- a small parser for cbindgen's C ----------------------------------------------------------


@dataclass(frozen=True)
class Int:
    """An integer type: its C name, size in bytes, signedness."""

    name: str
    size: int
    signed: bool


@dataclass(frozen=True)
class Named:
    """``struct X`` (or ``void``): a struct with fields, an opaque handle, or void."""

    name: str


@dataclass(frozen=True)
class Ptr:
    """A pointer; ``const`` when what it points to is const."""

    to: CType
    const: bool


CType = Union[Int, Named, Ptr]

_INTS = {
    "uint8_t": (1, False),
    "int8_t": (1, True),
    "uint16_t": (2, False),
    "int16_t": (2, True),
    "uint32_t": (4, False),
    "int32_t": (4, True),
    "uint64_t": (8, False),
    "int64_t": (8, True),
    "size_t": (ctypes.sizeof(ctypes.c_size_t), False),
    "intptr_t": (ctypes.sizeof(ctypes.c_ssize_t), True),
    # Only as `const char *`: a NUL-terminated string.
    "char": (1, True),
}


def parse_type(text: str) -> CType:
    """A C type such as ``const uint8_t *const *`` (no declarator name)."""
    tokens = re.findall(r"\*|\w+", text)
    const = False
    base: CType | None = None
    for token in tokens:
        if token == "const":
            const = True
        elif token == "struct":
            continue
        elif token == "*":
            assert base is not None, f"a pointer to nothing in {text!r}"
            base, const = Ptr(base, const), False
        else:
            assert base is None, f"two type names in {text!r}"
            if token in _INTS:
                base = Int(token, *_INTS[token])
            elif token == "void" or token.startswith("Tether"):
                base = Named(token)
            else:
                raise AssertionError(f"unknown C type {token!r} in {text!r}: teach test_header.py")
    assert base is not None, f"no type in {text!r}"
    return base


def _declaration(text: str) -> tuple[CType, str]:
    """``const uint8_t *event`` -> (its type, ``event``)."""
    match = re.fullmatch(r"(.*?)(\w+)\s*(\[\d*\])?", text.strip(), re.S)
    assert match and not match.group(3), f"cannot read the declaration {text!r}"
    return parse_type(match.group(1)), match.group(2)


@dataclass
class Header:
    """What the header declares."""

    functions: dict[str, tuple[CType, list[tuple[CType, str]]]]
    structs: dict[str, list[tuple[CType, str]]]
    opaque: set[str]
    defines: dict[str, int]


def parse_header(text: str) -> Header:
    """Functions, structs (fields in order), opaque types and integer ``#define``s."""
    defines = {
        name: int(value)
        for name, value in re.findall(r"^#define\s+(TETHER_\w+)\s+(-?\d+)\s*$", text, re.M)
    }
    code = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    code = re.sub(r"//[^\n]*", " ", code)
    code = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith("#"))
    code = code.replace('extern "C"', " ")
    structs = {}
    for name, body, alias in re.findall(
        r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;", code, re.S
    ):
        assert name == alias, f"typedef struct {name} {{...}} {alias}"
        structs[name] = [_declaration(field) for field in body.split(";") if field.strip()]
    code = re.sub(r"typedef\s+struct\s+\w+\s*\{.*?\}\s*\w+\s*;", " ", code, flags=re.S)
    opaque = set()
    for name, alias in re.findall(r"typedef\s+struct\s+(\w+)\s+(\w+)\s*;", code):
        assert name == alias, f"typedef struct {name} {alias}"
        opaque.add(name)
    functions = {}
    for statement in code.split(";"):
        statement = statement.replace("{", " ").replace("}", " ").strip()
        match = re.fullmatch(r"(.+?)\b(tether_\w+)\s*\((.*)\)", statement, re.S)
        if match is None:
            continue
        ret, name, params = match.groups()
        assert name not in functions, f"{name} declared twice"
        params = params.strip()
        args = [] if params in ("", "void") else [_declaration(p) for p in params.split(",")]
        functions[name] = (parse_type(ret), args)
    return Header(functions, structs, opaque, defines)


# ----- ctypes against C --------------------------------------------------------------------------


def _describe(c: CType) -> str:
    if isinstance(c, Int):
        return c.name
    if isinstance(c, Named):
        return c.name
    return f"{'const ' if c.const else ''}{_describe(c.to)} *"


def _int_of(t: type) -> tuple[int, bool] | None:
    """Size and signedness of a ctypes integer type, or ``None`` for any other type."""
    if not (isinstance(t, type) and issubclass(t, ctypes._SimpleCData)):
        return None
    if t._type_ not in "bBhHiIlLqQnN":
        return None
    return ctypes.sizeof(t), t(-1).value < 0


def _c_name(structure: type) -> str:
    """The header's name for a ctypes Structure: ``RelayConfig`` is ``TetherRelayConfig``."""
    return "Tether" + structure.__name__


def mismatch(py: object, c: CType, header: Header, returned: bool = False) -> str | None:
    """Why ctypes type ``py`` does not pass (or return) C type ``c``; ``None`` when it does."""
    want = _describe(c)
    if py is None:
        return None if c == Named("void") and returned else f"None where C has {want}"
    if c == Named("void"):
        return f"{getattr(py, '__name__', py)} where C has void"
    as_int = _int_of(py)  # type: ignore[arg-type]
    if isinstance(c, Int):
        if as_int == (c.size, c.signed):
            return None
        return f"{getattr(py, '__name__', py)} where C has {want}"
    if isinstance(c, Named):
        return f"{getattr(py, '__name__', py)} where C has struct {want} by value"
    # A pointer.
    if py is ctypes.c_char_p:
        if c.const and c.to in (Int("uint8_t", 1, False), Int("char", 1, True)):
            return None
        return f"c_char_p (immutable bytes) where C has {want}"
    if py is ctypes.c_void_p:
        if isinstance(c.to, Named) and (c.to.name in header.opaque or c.to.name == "void"):
            return None
        return f"c_void_p where C has {want} (c_void_p is for opaque handles only)"
    if isinstance(py, type) and issubclass(py, ctypes._Pointer):
        pointee = py._type_
        if isinstance(c.to, Named) and c.to.name in header.structs:
            is_structure = isinstance(pointee, type) and issubclass(pointee, ctypes.Structure)
            if is_structure and _c_name(pointee) == c.to.name:
                return None
            return f"POINTER({pointee.__name__}) where C has {want}"
        inner = mismatch(pointee, c.to, header)
        return None if inner is None else f"POINTER({pointee.__name__}) where C has {want}: {inner}"
    return f"{getattr(py, '__name__', py)} where C has {want}"


def _structures() -> dict[str, type]:
    """The package's ctypes Structures by their header name."""
    return {
        _c_name(value): value
        for value in vars(_ffi).values()
        if isinstance(value, type)
        and issubclass(value, ctypes.Structure)
        and value is not ctypes.Structure
        and value.__module__ == _ffi.__name__
    }


def drift(header: Header) -> list[str]:
    """Every difference between ``tether._ffi``'s tables and ``header``; empty when none."""
    problems = []
    table = _ffi._SIGNATURES
    for name in sorted(set(header.functions) - set(table)):
        problems.append(f"{name}: in tether.h, missing from _SIGNATURES")
    for name in sorted(set(table) - set(header.functions)):
        problems.append(f"{name}: in _SIGNATURES, not in tether.h")
    for name in sorted(set(table) & set(header.functions)):
        restype, argtypes = table[name]
        c_ret, c_args = header.functions[name]
        why = mismatch(restype, c_ret, header, returned=True)
        if why:
            problems.append(f"{name}: returns {why}")
        if len(argtypes) != len(c_args):
            problems.append(
                f"{name}: {len(argtypes)} arguments in _SIGNATURES, {len(c_args)} in tether.h"
            )
            continue
        for i, (py, (c, arg)) in enumerate(zip(argtypes, c_args)):
            why = mismatch(py, c, header)
            if why:
                problems.append(f"{name}: argument {i} ({arg}): {why}")
    for name in getattr(_ffi, "_RELEASING", ()):
        if name not in table:
            problems.append(f"{name}: in _RELEASING, not in _SIGNATURES")
    ours = _structures()
    for name in sorted(set(header.structs) - set(ours)):
        problems.append(f"struct {name}: in tether.h, no ctypes Structure for it")
    for name in sorted(set(ours) - set(header.structs)):
        problems.append(f"Structure {ours[name].__name__}: no struct {name} in tether.h")
    for name in sorted(set(ours) & set(header.structs)):
        fields = ours[name]._fields_
        c_fields = header.structs[name]
        py_names = [f[0] for f in fields]
        c_names = [arg for _, arg in c_fields]
        if py_names != c_names:
            problems.append(f"struct {name}: fields {py_names} in _ffi, {c_names} in tether.h")
            continue
        for (field, py), (c, _) in zip(fields, c_fields):
            why = mismatch(py, c, header)
            if why:
                problems.append(f"struct {name}.{field}: {why}")
    for name, value in sorted(vars(_ffi).items()):
        c_value = header.defines.get(f"TETHER_{name}")
        is_int = isinstance(value, int) and not isinstance(value, bool)
        if is_int and c_value is not None and value != c_value:
            problems.append(f"{name} = {value} in _ffi, TETHER_{name} {c_value} in tether.h")
    verdicts = {
        f"TETHER_VERIFY_{why.upper()}": code
        for code, why in _ffi._VERDICTS.items()
        if why is not None
    }
    c_verdicts = {k: v for k, v in header.defines.items() if k.startswith("TETHER_VERIFY_")}
    if verdicts != c_verdicts:
        problems.append(f"_VERDICTS {verdicts} in _ffi, {c_verdicts} in tether.h")
    return problems


# ----- the tests ---------------------------------------------------------------------------------


def test_the_ctypes_table_is_the_header() -> None:
    header = parse_header(header_text())
    # The parser saw the whole header, not a prefix of it.
    assert len(header.functions) >= 80 and "tether_abi_version" in header.functions
    assert {"TetherRelayConfig", "TetherSseConfig", "TetherPoolConfig"} <= set(header.structs)
    assert {"TetherRelay", "TetherSse", "TetherPool"} <= header.opaque
    assert drift(header) == []


def _changed(text: str, old: str, new: str) -> Header:
    assert text.count(old) == 1, old
    return parse_header(text.replace(old, new))


def test_a_changed_signature_is_caught() -> None:
    """The check fails on each kind of change the header can make (it is not vacuous)."""
    text = header_text()
    cases = [
        # A retyped argument.
        (
            "int32_t tether_verify_event(const uint8_t *event, size_t event_len);",
            "int32_t tether_verify_event(const uint8_t *event, uint32_t event_len);",
            ("tether_verify_event: argument 1 (event_len): ", "where C has uint32_t"),
        ),
        # An added argument.
        (
            "int32_t tether_verify_event(const uint8_t *event, size_t event_len);",
            "int32_t tether_verify_event(const uint8_t *event, size_t event_len, uint32_t x);",
            ("tether_verify_event: 2 arguments in _SIGNATURES, 3 in tether.h",),
        ),
        # A retyped return.
        (
            "uint32_t tether_abi_version(void);",
            "uint64_t tether_abi_version(void);",
            ("tether_abi_version: returns ", "where C has uint64_t"),
        ),
        # A written buffer where the table passes immutable bytes.
        (
            "int32_t tether_verify_event(const uint8_t *event, size_t event_len);",
            "int32_t tether_verify_event(uint8_t *event, size_t event_len);",
            ("tether_verify_event: argument 0 (event): c_char_p (immutable bytes)", "uint8_t *"),
        ),
        # A new function.
        (
            "uint32_t tether_abi_version(void);",
            "uint32_t tether_abi_version(void);\nvoid tether_new_thing(void);",
            ("tether_new_thing: in tether.h, missing from _SIGNATURES",),
        ),
        # A struct field retyped.
        (
            "  uint32_t max_connecting;",
            "  uint64_t max_connecting;",
            ("struct TetherPoolConfig.max_connecting: ", "where C has uint64_t"),
        ),
        # A struct field added.
        (
            "  uint32_t max_connecting;",
            "  uint32_t max_connecting;\n  uint32_t max_more;",
            ("struct TetherPoolConfig: fields", "'max_more'"),
        ),
        # A constant renumbered.
        ("#define TETHER_ERR_NULL -2", "#define TETHER_ERR_NULL -20", ("ERR_NULL = -2 in _ffi",)),
    ]
    for old, new, expected in cases:
        problems = drift(_changed(text, old, new))
        assert any(all(part in p for part in expected) for p in problems), (new, problems)
    # And a function the header drops.
    removed = _changed(text, "uint32_t tether_abi_version(void);", "")
    assert "tether_abi_version: in _SIGNATURES, not in tether.h" in drift(removed)


def test_the_parser_reads_cbindgen_declarations() -> None:
    header = parse_header(
        "typedef struct TetherX TetherX;\n"
        "typedef struct TetherY {\n  // doc\n  uint32_t a;\n  uint64_t b;\n} TetherY;\n"
        '#ifdef __cplusplus\nextern "C" {\n#endif\n'
        "// doc\nint32_t tether_f(const struct TetherY *config,\n"
        "                 const uint8_t *const *events,\n                 struct TetherX **out);\n"
        "void tether_g(void);\n"
        '#ifdef __cplusplus\n}  // extern "C"\n#endif\n'
    )
    u8 = Int("uint8_t", 1, False)
    assert header.opaque == {"TetherX"}
    assert header.structs == {
        "TetherY": [(Int("uint32_t", 4, False), "a"), (Int("uint64_t", 8, False), "b")]
    }
    assert header.functions == {
        "tether_f": (
            Int("int32_t", 4, True),
            [
                (Ptr(Named("TetherY"), True), "config"),
                (Ptr(Ptr(u8, True), True), "events"),
                (Ptr(Ptr(Named("TetherX"), False), False), "out"),
            ],
        ),
        "tether_g": (Named("void"), []),
    }
