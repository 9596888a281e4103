"""Print one of the README's two commands, as written: `generate` or `test` (the bare code
blocks of its section "The two commands", in order). CI runs them from here, so what it runs
is what the README says."""

import re
import sys
from pathlib import Path

section = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
section = section.split("## The two commands", 1)[1].split("\n## ", 1)[0]
# every fenced block with its info string; the commands are those without one
fenced = re.findall(r"^```(\w*)\n(.*?)^```$", section, re.S | re.M)
blocks = [body for info, body in fenced if not info]
which = {"generate": 0, "test": 1}
if len(sys.argv) != 2 or sys.argv[1] not in which:
    sys.exit("usage: python3 .ci/readme_command.py generate|test")
print(blocks[which[sys.argv[1]]].strip())
