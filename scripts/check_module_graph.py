#!/usr/bin/env python3
"""Checks every #include "..." of the module directories against the module graph.

The allowed graph is written once, in the ```module-graph fenced block of
docs/architecture.md: one line per module, `module: dep dep ...`, naming the
other modules whose headers its code may include. A line whose key holds a
slash (`server/daemon.cc: model`) is a file pattern (fnmatch, from the
repository root) whose files may also include the modules listed there.
`#` starts a comment.

An include counts as an edge when its first path component is a module of the
graph. An include of another top-level directory of the repository (tests/,
fuzz/, bench/, ...) from module code is an error as well; anything else
(absl/, gtest/, generated loom/v1/...) is a third-party or generated header and
is not checked. The graph itself must be acyclic and name existing directories.

Usage: scripts/check_module_graph.py [--root DIR]. Exits 1 when anything is wrong.
"""
import argparse
import fnmatch
import os
import re
import sys

DOC = os.path.join("docs", "architecture.md")
SOURCE_SUFFIXES = (".h", ".cc", ".cu", ".cuh")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
FENCE_RE = re.compile(r"^```module-graph\s*$")


class GraphError(Exception):
    """The graph block is missing or malformed."""


def read_graph_block(doc_text):
    """The lines of the one ```module-graph block of doc_text."""
    lines = doc_text.splitlines()
    starts = [i for i, line in enumerate(lines) if FENCE_RE.match(line)]
    if len(starts) != 1:
        raise GraphError(f"{DOC} must hold exactly one ```module-graph block, found {len(starts)}")
    body = []
    for line in lines[starts[0] + 1:]:
        if line.startswith("```"):
            return body
        body.append(line)
    raise GraphError(f"the ```module-graph block of {DOC} is not closed")


def parse_graph(block_lines):
    """(modules, file_rules): module -> set of allowed deps; [(pattern, deps)]."""
    modules, file_rules = {}, []
    for number, raw in enumerate(block_lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, sep, rest = line.partition(":")
        key = key.strip()
        if not sep or not key:
            raise GraphError(f"module-graph line {number}: expected 'module: deps', got {raw!r}")
        deps = set(rest.split())
        if "/" in key:
            file_rules.append((key, deps))
        elif key in modules:
            raise GraphError(f"module-graph line {number}: {key} is listed twice")
        else:
            modules[key] = deps
    for owner, deps in list(modules.items()) + file_rules:
        unknown = sorted(d for d in deps if d not in modules)
        if unknown:
            raise GraphError(f"module-graph: {owner} depends on unknown module(s) {', '.join(unknown)}")
    for pattern, _ in file_rules:
        if pattern.split("/", 1)[0] not in modules:
            raise GraphError(f"module-graph: file rule {pattern} is not inside a module")
    return modules, file_rules


def find_cycle(modules):
    """A list of modules forming a cycle, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for dep in sorted(modules[node]):
            if dep == node:
                continue
            if state.get(dep) == "open":
                return path[path.index(dep):] + [dep]
            if dep not in state:
                cycle = visit(dep, path + [dep])
                if cycle:
                    return cycle
        state[node] = "done"
        return None

    for node in sorted(modules):
        if node not in state:
            cycle = visit(node, [node])
            if cycle:
                return cycle
    return None


def source_files(root, module):
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, module)):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(SOURCE_SUFFIXES):
                yield os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")


def allowed_for(path, module, modules, file_rules):
    allowed = set(modules[module]) | {module}
    for pattern, deps in file_rules:
        if fnmatch.fnmatch(path, pattern):
            allowed |= deps
    return allowed


def check(root):
    """The list of problems found under root (empty when all is well)."""
    doc = os.path.join(root, DOC)
    try:
        with open(doc, encoding="utf-8") as f:
            modules, file_rules = parse_graph(read_graph_block(f.read()))
    except (OSError, GraphError) as e:
        return [str(e)]
    problems = []
    for module in sorted(modules):
        if not os.path.isdir(os.path.join(root, module)):
            problems.append(f"module-graph: module {module} has no directory {module}/")
    cycle = find_cycle(modules)
    if cycle:
        problems.append("module-graph: cycle " + " -> ".join(cycle))
    top_dirs = {d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))}
    for module in sorted(m for m in modules if os.path.isdir(os.path.join(root, m))):
        for path in source_files(root, module):
            allowed = allowed_for(path, module, modules, file_rules)
            with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    match = INCLUDE_RE.match(line)
                    if not match or "/" not in match.group(1):
                        continue
                    target = match.group(1).split("/", 1)[0]
                    if target in modules:
                        if target not in allowed:
                            problems.append(f'{path}:{number}: {module} -> {target} is not in the '
                                            f'module graph (#include "{match.group(1)}")')
                    elif target in top_dirs:
                        problems.append(f'{path}:{number}: module code includes {target}/, which '
                                        f'is not a module (#include "{match.group(1)}")')
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--root", default=default_root, help="repository root")
    args = parser.parse_args(argv)
    problems = check(args.root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_module_graph: {len(problems)} problem(s); the graph is in {DOC}")
        return 1
    print("check_module_graph: every include follows the module graph")
    return 0


if __name__ == "__main__":
    sys.exit(main())
