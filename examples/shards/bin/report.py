"""report.py OUT EVAL...: the evaluations as a Markdown table."""

import json
import os
import sys

out, evals = sys.argv[1], sys.argv[2:]
lines = ["# Model report", "", "| split | rows | RMSE |", "|---|---|---|"]
for path in evals:
    with open(path) as f:
        e = json.load(f)
    lines.append(f"| {e['split']} | {e['rows']} | {e['rmse']} |")
with open(out + ".part", "w") as f:
    f.write("\n".join(lines) + "\n")
os.replace(out + ".part", out)
