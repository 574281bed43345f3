# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Training losses of resumed runs side by side with an uninterrupted one, at the same steps.

  python3 compare.py FIRST LAST BASE_DIR NAME=DIR [NAME=DIR ...]

Each DIR is a Hugging Face Trainer output_dir (its trainer_state.json, else its newest checkpoint's). Prints one line a
step FIRST..LAST: the base loss, then each run's loss and its difference from the base in per cent; then the mean loss
of the range and its difference; then one JSON line of all of it. Exit status 1 when a run lacks a step of the range.
"""

import glob
import json
import os
import sys


def losses(out_dir):
    path = os.path.join(out_dir, "trainer_state.json")
    if not os.path.isfile(path):
        ckpts = sorted(glob.glob(os.path.join(out_dir, "checkpoint-*", "trainer_state.json")),
                       key=lambda p: int(p.split("checkpoint-")[-1].split(os.sep)[0]))
        if not ckpts:
            return {}
        path = ckpts[-1]
    with open(path) as f:
        history = json.load(f)["log_history"]
    return {e["step"]: e["loss"] for e in history if "loss" in e}


def main(argv):
    first, last, base_dir, runs = int(argv[0]), int(argv[1]), argv[2], [a.split("=", 1) for a in argv[3:]]
    base = losses(base_dir)
    table = {name: losses(d) for name, d in runs}
    names = list(table)
    steps = list(range(first, last + 1))
    ok = all(s in base for s in steps)
    print("step  base    " + "  ".join("%-16s" % name for name in names))
    for s in steps:
        cells = []
        for name in names:
            v = table[name].get(s)
            ok = ok and v is not None
            cells.append("%-16s" % ("-" if v is None or s not in base else "%.4f %+.2f%%" % (v, 100 * (v - base[s]) / base[s])))
        print("%-5d %-7s " % (s, "%.4f" % base[s] if s in base else "-") + "  ".join(cells))
    summary = {"steps": [first, last], "base": {s: base.get(s) for s in steps}, "runs": {}}
    full = {name: all(s in table[name] for s in steps) for name in names}
    if all(s in base for s in steps):
        mean_base = sum(base[s] for s in steps) / len(steps)
        means = {name: sum(table[name][s] for s in steps) / len(steps) for name in names if full[name]}
        print("mean  %.4f  " % mean_base + "  ".join(
            "%-16s" % ("%.4f %+.2f%%" % (means[name], 100 * (means[name] - mean_base) / mean_base)
                       if name in means else "-") for name in names))
        summary["mean_base"] = mean_base
    for name in names:
        diffs = [100 * (table[name][s] - base[s]) / base[s] for s in steps if s in table[name] and s in base]
        summary["runs"][name] = {"loss": {s: table[name].get(s) for s in steps},
                                 "max_abs_diff_pct": max(map(abs, diffs)) if diffs else None,
                                 "mean": sum(table[name][s] for s in steps) / len(steps) if full[name] else None}
    print(json.dumps(summary, sort_keys=True))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
