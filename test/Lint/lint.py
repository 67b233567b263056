"""Source checks of the pass plumbing (run by test/Lint/plumbing.test).

  1. Pipelines are built from pass objects: no `addTextual`, and no
     `parsePassPipeline` of a ds pass, in the compiler's sources.
  2. No `report_fatal_error` in lib/ or tools/: every error a user can reach
     is a diagnostic and a non-zero exit.
  3. No string literal of a ds attribute name outside the dialect: the
     names declared in DSBase.td (`k...AttrName = "ds.x"`) are used through
     those constants, in code and in messages ("'ds.x'").
  4. One step analysis: the helpers it provides (float-tensor test,
     forward-op test, parameter tracing, the created-ops listener, the
     activity sweep) are defined only in lib/Analysis.

Usage: lint.py SOURCE_ROOT. Prints one line per finding and exits 1 if any.
"""
import os
import re
import sys

root = sys.argv[1]
findings = []


def sources(*dirs, exclude=()):
    for d in dirs:
        for base, _, files in os.walk(os.path.join(root, d)):
            rel = os.path.relpath(base, root)
            if any(rel == e or rel.startswith(e + os.sep) for e in exclude):
                continue
            for f in files:
                if f.endswith((".cpp", ".h")):
                    path = os.path.join(base, f)
                    yield os.path.relpath(path, root), open(path).read()


def report(path, text, pos, what):
    line = text.count("\n", 0, pos) + 1
    findings.append("%s:%d: %s" % (path, line, what))


def code_only(text):
    """`text` with comments blanked (line structure kept)."""
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group()),
                  text, flags=re.S)
    return re.sub(r"//[^\n]*", lambda m: " " * len(m.group()), text)


COMPILER = ("lib", "tools", "include", "test/lib")

# 1 and 2.
for path, text in sources(*COMPILER):
    code = code_only(text)
    for m in re.finditer(r"\baddTextual\b", code):
        report(path, text, m.start(), "addTextual: build pipelines with "
               "pm.addPass(create...(options))")
    for m in re.finditer(r"\bparsePassPipeline\s*\(([^;]*)", code):
        if re.search(r'"[^"]*\bds-', m.group(1)):
            report(path, text, m.start(), "parsePassPipeline of a ds pass")
    if path.startswith(("lib", "tools")):
        for m in re.finditer(r"\breport_fatal_error\b", code):
            report(path, text, m.start(), "report_fatal_error: emit a "
                   "diagnostic and fail instead")

# 3. The declared names.
td = open(os.path.join(root, "include/ds/Dialect/DS/IR/DSBase.td")).read()
names = re.findall(r'k\w+AttrName\s*=\s*"(ds\.[a-z_]+)"', td)
if len(names) < 10:
    findings.append("DSBase.td: found only %d declared attribute names"
                    % len(names))
literal = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
for path, text in sources(*COMPILER,
                          exclude=("lib/Dialect", "include/ds/Dialect")):
    code = code_only(text)
    for m in literal.finditer(code):
        body = m.group(1)
        for name in names:
            if body == name or re.search(r"'%s'" % re.escape(name), body):
                report(path, text, m.start(), "string literal of the ds "
                       "attribute '%s': use the DSDialect constant" % name)

# 4. One analysis.
helpers = [
    (r"\bbool\s+isFloatTensor\s*\(", "isFloatTensor"),
    (r"\bbool\s+isForward\w*\s*\(\s*Operation", "a forward-op test"),
    (r"\bBlockArgument\s+traceToParam\s*\(", "traceToParam"),
    (r"\bstruct\s+\w*CreatedOps\w*\s*:", "a created-ops listener"),
    # The activity sweep: a set of values grown over the block in reverse
    # from the loss.
    (r"DenseSet<Value>\s+\w+\s*\{\s*loss\s*\}", "an activity sweep"),
]
# The dialect is below the analysis (which depends on it) and keeps its own
# verifier helpers.
for path, text in sources("lib", "tools",
                          exclude=("lib/Analysis", "lib/Dialect")):
    code = code_only(text)
    for pattern, what in helpers:
        for m in re.finditer(pattern, code):
            report(path, text, m.start(), "%s outside lib/Analysis: use the "
                   "step analysis" % what)

for f in findings:
    print(f)
print("lint: %d finding(s), %d attribute names checked" %
      (len(findings), len(names)))
sys.exit(1 if findings else 0)
