#!/usr/bin/env python3
"""Prints the Markdown of one or more conformance runs (results JSON of runner.py), for
docs/conformance.md.  Usage: report.py "Title=path/results.json" ...  (Python stdlib only)"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runner  # noqa: E402


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    for arg in argv:
        title, _, path = arg.rpartition("=")
        with open(path) as f:
            report = json.load(f)
        dirs = list(report["summary"].keys())
        print("### %s\n" % (title or path))
        print(runner.markdown(report, dirs))
        freq = report.get("missing_functions") or []
        if freq:
            print("Missing functions behind the build failures (number of tests needing each): "
                  + ", ".join("`%s` %d" % (name, n) for name, n in freq) + ".\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
