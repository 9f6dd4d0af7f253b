"""evaluate.py MODEL MERGED SPLIT OUT: the model's root mean square error on one split of the rows
(val, test or holdout: rows 1, 2 and 3 of every 4; train used row 0)."""

import csv
import json
import math
import os
import sys

model_path, merged, split, out = sys.argv[1:5]
offset = {"val": 1, "test": 2, "holdout": 3}[split]
with open(model_path) as f:
    model = json.load(f)
with open(merged, newline="") as f:
    rows = [(float(r["x"]), float(r["y"])) for i, r in enumerate(csv.DictReader(f)) if i % 4 == offset]
errors = [(model["a"] + model["b"] * x - y) ** 2 for x, y in rows]
rmse = math.sqrt(sum(errors) / len(errors)) if errors else 0.0
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out + ".part", "w") as f:
    json.dump({"split": split, "rows": len(rows), "rmse": round(rmse, 4)}, f)
os.replace(out + ".part", out)
