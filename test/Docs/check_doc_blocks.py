"""Checks that every fenced code block of a Markdown file appears verbatim in
one of the given source files. Usage: check_doc_blocks.py DOC.md SOURCE...
"""
import os
import re
import sys

doc = open(sys.argv[1]).read()
sources = {p: open(p).read() for p in sys.argv[2:]}
blocks = re.findall(r"```[a-z]*\n(.*?)```", doc, re.S)
if not blocks:
    sys.exit("no code blocks in %s" % sys.argv[1])
for i, block in enumerate(blocks):
    if not any(block in text for text in sources.values()):
        sys.exit("code block %d of %s (starting %r) is in none of %s" %
                 (i + 1, sys.argv[1], block.splitlines()[0],
                  ", ".join(os.path.basename(p) for p in sources)))
print("%d code blocks of %s found in the sources" %
      (len(blocks), os.path.basename(sys.argv[1])))
