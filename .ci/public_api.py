#!/usr/bin/env python3
"""The public API of a crate, one item per line, from rustdoc's JSON (nightly).

Walks the crate's public modules from its root: every public module, struct, enum (with its
variants), union, trait, function, constant, static, type alias and macro, the public
methods and associated constants of their inherent impls, and re-exports (`use`) by the
path they are re-exported at. Items hidden from docs (`#[doc(hidden)]`) are left out. Only
paths and kinds: a removed, added or moved item shows; a changed signature does not.

Usage: .ci/public_api.py CRATE_JSON > LISTING
"""

import json
import sys

KINDS = {
    "module", "struct", "enum", "union", "trait", "function", "constant", "static",
    "type_alias", "macro", "trait_alias",
}


def main() -> int:
    doc = json.load(open(sys.argv[1]))
    index = doc["index"]
    item = lambda i: index.get(str(i))  # noqa: E731
    lines = set()
    seen = set()

    def public(it) -> bool:
        return it is not None and it.get("visibility") == "public" and "hidden" not in str(
            it.get("attrs", [])
        )

    def impls(it, path):
        inner = next(iter(it["inner"].values()))
        for impl_id in inner.get("impls", []) if isinstance(inner, dict) else []:
            impl = item(impl_id)
            if impl is None:
                continue
            body = impl["inner"]["impl"]
            if body.get("trait") is not None or body.get("blanket_impl") is not None:
                continue
            for member in body.get("items", []):
                m = item(member)
                if public(m):
                    kind = next(iter(m["inner"]))
                    lines.add(f"{kind} {path}::{m['name']}")

    def walk(module_id, path):
        if module_id in seen:
            return
        seen.add(module_id)
        module = item(module_id)
        for child_id in module["inner"]["module"]["items"]:
            child = item(child_id)
            if not public(child):
                continue
            kind = next(iter(child["inner"]))
            if kind == "use":
                use = child["inner"]["use"]
                target = item(use.get("id")) if use.get("id") is not None else None
                name = use["name"]
                if use.get("is_glob"):
                    lines.add(f"use {path}::{use['source']}::*")
                    continue
                lines.add(f"use {path}::{name} = {use['source']}")
                if target is not None and next(iter(target["inner"])) == "module":
                    walk(use["id"], f"{path}::{name}")
                continue
            if kind not in KINDS:
                continue
            child_path = f"{path}::{child['name']}"
            lines.add(f"{kind} {child_path}")
            if kind == "module":
                walk(child_id, child_path)
            elif kind == "enum":
                for v in child["inner"]["enum"]["variants"]:
                    lines.add(f"variant {child_path}::{item(v)['name']}")
                impls(child, child_path)
            elif kind in ("struct", "union"):
                impls(child, child_path)

    root = doc["root"]
    walk(root, item(root)["name"])
    print("\n".join(sorted(lines)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
