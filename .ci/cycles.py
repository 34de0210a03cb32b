#!/usr/bin/env python3
"""Import cycles between a crate's modules, from its `use` lines and `crate::` paths.

Each `.rs` file under a crate's `src/` is a module (`a/b.rs` and `a/b/mod.rs` are `a::b`).
A `use crate::...`, `use super::...` or `use self::...` line is an edge to the deepest
module its path names. A module and its ancestors may use each other (a parent declares its
children; a child may use its parent's items): those edges are not counted. Any other cycle
fails: it means two modules cannot be read, tested or moved one without the other.

Usage: .ci/cycles.py CRATE_DIR...  (exit 1 when a cycle is found)
"""

import re
import sys
from pathlib import Path

USE = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.M)
# A path written out in code (`crate::wire::out_of_files(..)`) is an edge too.
INLINE = re.compile(r"(?<![\w:])crate(?:::[A-Za-z_][A-Za-z0-9_]*)+")


def module_of(src: Path, file: Path) -> tuple:
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts.pop()
    return tuple(parts)


def expand(tree: str) -> list:
    """`a::{b, c::d}` -> ["a::b", "a::c::d"] (nested braces included)."""
    tree = re.sub(r"\s+", "", tree)
    depth, start = 0, None
    for i, ch in enumerate(tree):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                prefix, inner, rest = tree[:start], tree[start + 1 : i], tree[i + 1 :]
                out = []
                for item in split_top(inner):
                    out += expand(prefix + item + rest)
                return out
    return [tree]


def split_top(text: str) -> list:
    items, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    if cur:
        items.append(cur)
    return items


def target(path: str, here: tuple, modules: set) -> tuple | None:
    segs = [s.split(" as ")[0] for s in path.split("::") if s]
    if not segs:
        return None
    if segs[0] == "crate":
        base, segs = (), segs[1:]
    elif segs[0] in ("super", "self"):
        base = here
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
    else:
        return None
    best = base
    for n in range(1, len(segs) + 1):
        if base + tuple(segs[:n]) in modules:
            best = base + tuple(segs[:n])
    return best


def related(a: tuple, b: tuple) -> bool:
    return a[: len(b)] == b or b[: len(a)] == a


def cycles(crate: Path) -> list:
    src = crate / "src"
    files = {module_of(src, f): f for f in src.rglob("*.rs")}
    modules = set(files)
    edges = {m: set() for m in modules}
    for m, f in files.items():
        text = re.sub(r"//[^\n]*", "", f.read_text())
        trees = USE.findall(text)
        code = USE.sub("", text)
        for tree in trees + INLINE.findall(code):
            for path in expand(tree):
                t = target(path, m, modules)
                if t is not None and t in modules and not related(m, t):
                    edges[m].add(t)
    # Tarjan's strongly connected components.
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(modules):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    found = 0
    crates = [Path(p) for p in sys.argv[1:]]
    for crate in crates:
        for comp in cycles(crate):
            found += 1
            names = ", ".join("::".join(m) or "crate" for m in comp)
            print(f"{crate}: import cycle: {names}")
    print(f"{len(crates)} crates checked, {found} import cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
