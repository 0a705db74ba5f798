"""Do two runs of bench/eval_dev.py give the same figures? Compares every quality figure of two results files.

Every (benchmark, half, method, budget) row's completeness and evidence recall (mean and interval) and tokens are
compared exactly; timings are reported as the ratio after/before of the evaluation wall time only. Typical use:
run eval_dev.py in a worktree of the old commit and in this checkout with the same arguments, then
`python bench/eval_compare.py before.json after.json`. Prints the verdict and writes bench/results/eval-compare.json.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import results_path, write_json  # noqa: E402

FIGURES = ("completeness", "evidence_recall", "tokens_mean")


def rows(results: dict) -> dict[tuple, dict]:
    return {(name, half, r["method"], r["budget"]): {k: r.get(k) for k in FIGURES}
            for name, bench in results["benchmarks"].items() for half, rs in bench["halves"].items() for r in rs}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    p.add_argument("--out", type=Path, default=results_path("eval-compare"))
    args = p.parse_args()
    before, after = json.loads(args.before.read_text()), json.loads(args.after.read_text())
    old, new = rows(before), rows(after)
    differ = [{"row": list(k), "before": old[k], "after": new.get(k)} for k in old if old[k] != new.get(k)]
    missing = [list(k) for k in new.keys() - old.keys()]
    out = {"before": str(args.before), "after": str(args.after), "rows": len(old), "differing": differ,
           "only_after": missing, "methods": sorted({k[2] for k in old}), "benchmarks": sorted(before["benchmarks"]),
           "evaluation_wall_s": [before.get("evaluation_wall_s_total"), after.get("evaluation_wall_s_total")]}
    write_json(args.out, out)
    verdict = "identical" if not differ and not missing else f"{len(differ)} rows differ, {len(missing)} new"
    print(f"{len(old)} rows (benchmark × half × method × budget) over {', '.join(out['benchmarks'])}; "
          f"methods {', '.join(out['methods'])}: {verdict} in {', '.join(FIGURES)}")
    for d in differ[:10]:
        print(d)


if __name__ == "__main__":
    main()
