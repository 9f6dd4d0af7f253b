"""train.py MERGED MODEL: fit y = a + b*x by least squares on row 0 of every 4 (the evaluations
use the others)."""

import csv
import json
import os
import sys

merged, model = sys.argv[1], sys.argv[2]
with open(merged, newline="") as f:
    rows = [(float(r["x"]), float(r["y"])) for i, r in enumerate(csv.DictReader(f)) if i % 4 == 0]
n = len(rows)
mx = sum(x for x, _ in rows) / n
my = sum(y for _, y in rows) / n
b = sum((x - mx) * (y - my) for x, y in rows) / sum((x - mx) ** 2 for x, _ in rows)
with open(model + ".part", "w") as f:
    json.dump({"a": my - b * mx, "b": b, "rows": n}, f, indent=1)
os.replace(model + ".part", model)
