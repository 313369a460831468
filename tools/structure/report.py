#!/usr/bin/env python3
"""How the workspace is built, measured as issue 31 counts it.

Prints, per crate: the import circles (strongly connected sets of source files that
name each other through `crate::`, `super::` or `self::` paths), the functions over 80
and 150 lines outside tests, and the crate cycles from `cargo metadata`.

    python3 tools/structure/report.py [--long] [--circles]

It reads the source as text (a brace matcher, not a parser), which is exact enough for
rustfmt-formatted code: test modules (`#[cfg(test)]`), `tests.rs` files and folders named `tests` are skipped.
"""
import json, os, re, subprocess, sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def crate_dirs():
    meta = json.loads(subprocess.check_output(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"], cwd=ROOT))
    crates = {}
    deps = {}
    names = {p["name"] for p in meta["packages"]}
    for p in meta["packages"]:
        d = os.path.dirname(p["manifest_path"])
        crates[p["name"]] = d
        deps[p["name"]] = {x["name"] for x in p["dependencies"] if x["name"] in names and x.get("kind") is None}
    return crates, deps

LITERAL = re.compile(r'''r(#*)"(?:.|\n)*?"\1|b?"(?:\\.|[^"\\])*"|b?'(?:\\.|[^\\'])'|//[^\n]*''', re.S)

def blank_literals(text):
    """Blanks string and char literals and line comments (newlines kept), so their braces
    do not count."""
    return LITERAL.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)

def strip_tests(text):
    """Drops `#[cfg(test)] mod x { ... }` blocks."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            if text[j] == "{": depth += 1
            elif text[j] == "}": depth -= 1
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)

def module_files(src):
    """Maps module path (tuple) → file, for every .rs under src (bins included)."""
    mods = {}
    for dirpath, dirnames, files in os.walk(src):
        dirnames[:] = [d for d in dirnames if d != "tests"]
        for f in files:
            if not f.endswith(".rs") or f == "tests.rs":
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src)
            parts = rel[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            if parts and parts[0] == "bin":
                continue
            mods[tuple(parts)] = os.path.join(dirpath, f)
    return mods

PATH = re.compile(r"\b(crate|super|self)((?:::\w+)+)")
USE_GROUP = re.compile(r"\buse\s+(crate|super|self)((?:::\w+)*)::\{([^;]*)\};", re.S)

def resolve(mods, here, is_dir_mod, head, rest):
    if head == "crate":
        base = ()
    elif head == "self":
        base = here
    else:
        base = here[:-1]
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
    path = base + tuple(rest)
    while path and path not in mods:
        path = path[:-1]
    return path

def circles(src):
    mods = module_files(src)
    graph = defaultdict(set)
    for here, f in mods.items():
        text = strip_tests(blank_literals(open(f).read()))
        is_dir = os.path.basename(f) in ("mod.rs", "lib.rs", "main.rs")
        refs = []
        for m in USE_GROUP.finditer(text):
            prefix = [x for x in m.group(2).split("::") if x]
            for item in re.split(r",", re.sub(r"\{[^{}]*\}", "", m.group(3))):
                item = item.strip().split(" as ")[0]
                if item:
                    refs.append((m.group(1), prefix + [x for x in item.split("::") if x and x != "self"]))
        for m in PATH.finditer(text):
            refs.append((m.group(1), [x for x in m.group(2).split("::") if x]))
        for head, rest in refs:
            target = resolve(mods, here, is_dir, head, rest)
            # A module naming its own ancestor's items is the normal shape of a tree;
            # an edge to an ancestor counts only when it reaches a sibling subtree.
            if target != here and target != ():
                graph[here].add(target)
    # Tarjan's strongly connected components.
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)
    def visit(v):
        index[v] = low[v] = counter[0]; counter[0] += 1
        stack.append(v); on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1:
                sccs.append(sorted("::".join(c) for c in comp))
    for v in list(mods):
        if v not in index:
            visit(v)
    return sccs

FN = re.compile(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+\"[^\"]*\"\s+)?fn\s+(\w+)", re.M)

def long_functions(src):
    found = []
    for dirpath, dirnames, files in os.walk(src):
        dirnames[:] = [d for d in dirnames if d != "tests"]
        for f in files:
            if not f.endswith(".rs") or f == "tests.rs":
                continue
            path = os.path.join(dirpath, f)
            text = strip_tests(blank_literals(open(path).read()))
            for m in FN.finditer(text):
                j = text.find("{", m.end())
                semi = text.find(";", m.end())
                if j < 0 or (0 <= semi < j):
                    continue
                depth, k = 1, j + 1
                while k < len(text) and depth:
                    c = text[k]
                    if c == "{": depth += 1
                    elif c == "}": depth -= 1
                    k += 1
                lines = text[m.start():k].count("\n") + 1
                if lines > 80:
                    found.append((lines, os.path.relpath(path, ROOT), m.group(2)))
    return found

def crate_cycles(deps):
    cycles = []
    def walk(n, seen):
        for d in deps.get(n, ()):
            if d in seen:
                cycles.append(seen[seen.index(d):] + [d])
            else:
                walk(d, seen + [d])
    for n in deps:
        walk(n, [n])
    return cycles

def main():
    crates, deps = crate_dirs()
    total_circles, long80, long150 = 0, [], []
    for name, d in sorted(crates.items()):
        src = os.path.join(d, "src")
        if not os.path.isdir(src):
            continue
        for c in circles(src):
            total_circles += 1
            if "--circles" in sys.argv:
                print(f"circle in {name} ({len(c)} files): {', '.join(c)}")
        for lines, path, fn in long_functions(src):
            long80.append((lines, path, fn))
            if lines > 150:
                long150.append((lines, path, fn))
    if "--long" in sys.argv:
        for lines, path, fn in sorted(long80, reverse=True):
            print(f"{lines:5} {path} {fn}")
    print(f"crate cycles: {len(crate_cycles(deps))}")
    print(f"import circles: {total_circles}")
    print(f"functions over 80 lines: {len(long80)}; over 150: {len(long150)}")

if __name__ == "__main__":
    main()
