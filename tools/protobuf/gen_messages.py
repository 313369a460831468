#!/usr/bin/env python3
"""Generate the protobuf schema table used by opkit-apiserver's protobuf decoder.

Reads the prost-generated sources of the k8s-pb crate (one Rust module per proto package,
structs annotated with `#[prost(<type>, optional|repeated, tag = "N")]`) and writes a compact,
deterministic text file, `crates/opkit-apiserver/src/protobuf/messages.txt`, listing every
message with its fields, plus the API group/version served by each package.

Usage:
    python3 tools/protobuf/gen_messages.py [--src PATH/TO/k8s-pb-X.Y.Z/src] [--out FILE]

Without --src the newest k8s-pb found in ~/.cargo/registry/src/*/ is used.

Output format (whitespace separated, one record per line, `#` starts a comment):
    P <package> <group or -> <version>      a proto package serving an API group/version
    M <package>.<Message>                   starts a message
    F <tag> <field> <type> [<flags>]        a field of the preceding message
where <type> is a scalar (string bool int32 int64 double bytes), a message full name, or
`map:<key>:<value>`; <flags> is `r` for repeated fields (omitted otherwise).
<field> is prost's snake_case field name (without `r#`); the decoder recovers the JSON name.
"""

import argparse
import glob
import os
import re
import sys

SCALARS = {"string", "bool", "int32", "int64", "double", "bytes", "float", "uint32", "uint64",
           "sint32", "sint64", "fixed32", "fixed64", "sfixed32", "sfixed64"}

# API groups of proto packages that have no `impl Resource` from which to read the group.
# Keyed by the package's API name (the directory above the version).
EXTRA_GROUPS = {
    "admission": "admission.k8s.io",
    "apidiscovery": "apidiscovery.k8s.io",
    "extensions": "extensions",
    "imagepolicy": "imagepolicy.k8s.io",
    "meta": "meta.k8s.io",
    "metrics": "metrics.k8s.io",
    "custom_metrics": "custom.metrics.k8s.io",
    "external_metrics": "external.metrics.k8s.io",
}

STRUCT_RE = re.compile(r"^pub struct (\w+) \{(?:\}|\n(.*?)^\})", re.S | re.M)
FIELD_RE = re.compile(
    r"^\(([^\]]*)\)\]\s*(?:#\[[^\n]*\n\s*)*pub (?:r#)?(\w+):\s*(.*?),?\s*$", re.S)
IMPL_RE = re.compile(
    r'impl crate::Resource for (\w+) \{.*?const GROUP: &\'static str = "([^"]*)";'
    r'.*?const VERSION: &\'static str = "([^"]*)";', re.S)


def find_src():
    """The newest k8s-pb source directory in the cargo registry."""
    pattern = os.path.expanduser("~/.cargo/registry/src/*/k8s-pb-*/src")
    found = sorted(glob.glob(pattern), key=version_key)
    if not found:
        sys.exit("k8s-pb sources not found; pass --src")
    return found[-1]


def version_key(path):
    m = re.search(r"k8s-pb-(\d+)\.(\d+)\.(\d+)", path)
    return tuple(int(x) for x in m.groups()) if m else (0, 0, 0)


def strip_comments(text):
    """Drop `///` doc comment lines and `#[doc = ...]` attributes."""
    lines = []
    for line in text.split("\n"):
        s = line.strip()
        if s.startswith("///") or s.startswith("//!") or s.startswith("// ") or s.startswith("#[doc"):
            continue
        lines.append(line)
    return "\n".join(lines)


def resolve(package, rust_type):
    """Resolve a Rust type path (relative to `package`) to a message full name."""
    rust_type = rust_type.strip()
    for wrapper in ("::core::option::Option<", "::prost::alloc::vec::Vec<",
                    "::prost::alloc::boxed::Box<"):
        while rust_type.startswith(wrapper):
            rust_type = rust_type[len(wrapper):-1].strip()
    parts = rust_type.split("::")
    pkg = package.split(".")
    while parts and parts[0] == "super":
        parts.pop(0)
        pkg.pop()
    if parts and parts[0] == "crate":
        parts.pop(0)
        pkg = []
    return ".".join(pkg + parts)


def split_map_value(rust_type):
    """The value type of `::prost::alloc::collections::BTreeMap<K, V>`."""
    inner = rust_type[rust_type.index("<") + 1:rust_type.rindex(">")]
    _key, value = inner.split(",", 1)
    return value.strip()


def parse_field(package, attrs, rust_type):
    """Return (tag, type, repeated) for one prost field attribute."""
    items = [a.strip() for a in attrs.split(",")]
    tag = None
    for a in items:
        m = re.match(r'tag\s*=\s*"(\d+)"', a)
        if m:
            tag = int(m.group(1))
    if tag is None:
        raise ValueError("no tag in %r" % attrs)
    repeated = "repeated" in items
    first = items[0]
    m = re.match(r'btree_map\s*=\s*"(\w+)', first)
    if m:
        key = m.group(1)
        value = attrs.split('"')[1].split(",")[1].strip()
        if value == "message":
            value = resolve(package, split_map_value(rust_type))
        return tag, "map:%s:%s" % (key, value), False
    m = re.match(r'bytes\s*=\s*"\w+"', first)
    if m:
        return tag, "bytes", repeated
    if first == "message":
        return tag, resolve(package, rust_type), repeated
    if first in SCALARS:
        return tag, first, repeated
    raise ValueError("unsupported prost attribute %r" % attrs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", help="k8s-pb src directory")
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.join(here, "..", "..", "crates", "opkit-apiserver", "src",
                               "protobuf", "messages.txt")
    ap.add_argument("--out", default=os.path.normpath(default_out))
    args = ap.parse_args()
    src = args.src or find_src()

    messages = {}  # full name -> list of (tag, name, type, repeated)
    packages = {}  # package -> API name ("apps" for api.apps.v1)
    groups_by_api = {}
    for path in sorted(glob.glob(os.path.join(src, "**", "mod.rs"), recursive=True)):
        rel = os.path.relpath(os.path.dirname(path), src)
        package = rel.replace(os.sep, ".")
        text = open(path, encoding="utf-8").read()
        if "::prost::Message" not in text:
            continue
        for m in IMPL_RE.finditer(text):
            api = package.split(".")[-2]
            groups_by_api.setdefault(api, m.group(2))
        code = strip_comments(text)
        for sm in STRUCT_RE.finditer(code):
            name, body = sm.group(1), sm.group(2) or ""
            fields = []
            for chunk in body.split("#[prost")[1:]:
                fm = FIELD_RE.match(chunk)
                if fm is None:
                    raise SystemExit("%s.%s: cannot parse field %r" % (package, name, chunk))
                rust_type = re.sub(r"\s+", "", fm.group(3)).replace(",>", ">")
                tag, ftype, repeated = parse_field(package, fm.group(1), rust_type)
                fields.append((tag, fm.group(2), ftype, repeated))
            attr_count = body.count("#[prost(")
            if attr_count != len(fields):
                raise SystemExit("%s.%s: parsed %d of %d fields" %
                                 (package, name, len(fields), attr_count))
            messages["%s.%s" % (package, name)] = sorted(fields)
        parts = package.split(".")
        if re.fullmatch(r"v\d+((alpha|beta)\d+)?", parts[-1]):
            packages[package] = parts[-2]

    # Sanity checks: every referenced message exists; no case-insensitive name clashes.
    lowered = {}
    for full in messages:
        key = full.lower()
        if key in lowered:
            raise SystemExit("case-insensitive clash: %s / %s" % (full, lowered[key]))
        lowered[key] = full
    for full, fields in messages.items():
        for _tag, fname, ftype, _rep in fields:
            target = ftype.split(":")[-1]
            if target not in SCALARS and target not in messages:
                raise SystemExit("%s.%s refers to unknown message %s" % (full, fname, target))

    out = ["# @generated by tools/protobuf/gen_messages.py from %s; do not edit."
           % os.path.basename(os.path.dirname(src)),
           "# P <package> <group or -> <version> | M <message> | F <tag> <field> <type> [r]"]
    for package in sorted(packages):
        api = packages[package]
        group = groups_by_api.get(api, EXTRA_GROUPS.get(api))
        if group is None:
            continue
        out.append("P %s %s %s" % (package, group or "-", package.split(".")[-1]))
    for full in sorted(messages):
        out.append("M " + full)
        for tag, fname, ftype, repeated in messages[full]:
            out.append("F %d %s %s%s" % (tag, fname, ftype, " r" if repeated else ""))
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    print("wrote %s: %d packages, %d messages" % (args.out, len(packages), len(messages)))


if __name__ == "__main__":
    main()
