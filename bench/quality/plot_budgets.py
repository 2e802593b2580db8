r"""ELECTRA against MLM across the ablation ledgers' budgets: a table and a PNG.

  python bench/quality/plot_budgets.py        # writes bench/results/ablation/budgets.png

Reads the finished rows of the objectives-study ledgers under bench/results/ablation (the
study itself with its checkpoints at 25/50/75%, and the runs at other budgets, other
generator widths or another pretraining seed made with `bench/quality/ablation.py --steps=...
--config_overrides=...`), and draws each encoder's fine-tuning average against its
pretraining FLOPs: the paper's Figure 4 over every budget measured. The points below 0.1
PFLOP are the 1x study's checkpoints at 25/50/75% of its run (learning rate not yet
decayed), the others are runs of their own. Rows come from the ledgers'
ablation_objectives.json (and the generator-size study's widest arm); nothing is measured
here.
"""

from __future__ import annotations

import argparse
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(os.path.dirname(HERE), "results", "ablation")

SERIES = {
    "electra": "ELECTRA, generator 1/2 of the width",
    "electra_gen1": "ELECTRA, generator as wide as the discriminator",
    "mlm": "MLM",
}
# (ledger directory, study, rows, series, pretraining seed).
SOURCES = (
    ("objectives", "objectives", ("electra", "electra@25%", "electra@50%", "electra@75%"),
     "electra", 0),
    ("objectives", "objectives", ("mlm", "mlm@25%", "mlm@50%", "mlm@75%"), "mlm", 0),
    ("budget_2x", "objectives", ("electra",), "electra", 0),
    ("budget_2x", "objectives", ("mlm",), "mlm", 0),
    ("budget_4x", "objectives", ("electra",), "electra", 0),
    ("budget_4x", "objectives", ("mlm",), "mlm", 0),
    ("generator_size", "generator_size", ("generator_1",), "electra_gen1", 0),
    ("budget_4x_gen1", "objectives", ("electra",), "electra_gen1", 0),
    ("pretrain_seed1", "objectives", ("electra",), "electra", 1),
    ("pretrain_seed1", "objectives", ("mlm",), "mlm", 1),
)


def read_rows(results: str) -> tuple[list[dict], dict | None]:
  """Every finished row the SOURCES name, and the no-pretraining row of the 1x study."""
  points, random = [], None
  for ledger, study, names, series, seed in SOURCES:
    # A study's own ledger holds its tables directly; a ledger of other runs, per study.
    folder = os.path.join(results, ledger) if ledger == study else os.path.join(
        results, ledger, study)
    path = os.path.join(folder, f"ablation_{study}.json")
    if not os.path.exists(path):
      continue
    with open(path, encoding="utf-8") as f:
      rows = json.load(f)["rows"]
    if ledger == "objectives":
      random = rows.get("random", random)
    for name in names:
      row = rows.get(name)
      if row is None or "pretrain_flops" not in row:
        continue
      points.append({"ledger": ledger, "row": name, "series": series, "seed": seed,
                     "pflop": row["pretrain_flops"] / 1e15, "steps": row.get("pretrain_steps"),
                     "mean": row["average"]["mean"], "stderr": row["average"]["stderr"]})
  return points, random


def table(points: list[dict], random: dict | None) -> str:
  lines = ["| series | pretraining seed | PFLOP | steps | average | ledger |",
           "|---|---|---|---|---|---|"]
  for p in sorted(points, key=lambda p: (p["series"], p["seed"], p["pflop"])):
    lines.append(f"| {SERIES[p['series']]} | {p['seed']} | {p['pflop']:.3f} | "
                 f"{p['steps'] or ''} | {p['mean']:.2f} ± {p['stderr']:.2f} | "
                 f"{p['ledger']}/{p['row']} |")
  if random:
    lines.append(f"| no pretraining | | 0 | 0 | {random['average']['mean']:.2f} ± "
                 f"{random['average']['stderr']:.2f} | objectives/random |")
  return "\n".join(lines)


def plot(points: list[dict], random: dict | None, path: str) -> None:
  import matplotlib  # noqa: PLC0415

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # noqa: PLC0415

  fig, ax = plt.subplots(figsize=(7, 5.5))
  colours = {"electra": "tab:blue", "electra_gen1": "tab:green", "mlm": "tab:orange"}
  for series, label in SERIES.items():
    for seed in (0, 1):
      chosen = sorted((p["pflop"], p["mean"], p["stderr"]) for p in points
                      if p["series"] == series and p["seed"] == seed)
      if not chosen:
        continue
      xs, ys, es = zip(*chosen)
      ax.errorbar(xs, ys, yerr=es, capsize=3, color=colours[series],
                  marker="o" if seed == 0 else "s",
                  markerfacecolor=colours[series] if seed == 0 else "none",
                  linestyle="-" if seed == 0 else "none",
                  label=label if seed == 0 else f"{label}, pretraining seed {seed}")
  if random:
    ax.axhline(random["average"]["mean"], color="grey", linestyle="--", label="no pretraining")
  ax.set_xscale("log", base=2)
  ax.set_xlabel("pretraining PFLOPs (log scale)")
  ax.set_ylabel("fine-tuning accuracy, task average (%)")
  ax.set_title("ELECTRA and MLM in miniature, by pretraining compute")
  ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
  fig.tight_layout()
  tmp = path + ".tmp.png"
  fig.savefig(tmp, dpi=120)
  os.replace(tmp, path)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--results", default=RESULTS, help="the ablation ledgers' root")
  parser.add_argument("--output", default=os.path.join(RESULTS, "budgets.png"))
  args = parser.parse_args()
  points, random = read_rows(args.results)
  if not points:
    raise SystemExit(f"no finished objectives rows under {args.results}")
  print(table(points, random))
  plot(points, random, args.output)
  print(f"wrote {args.output}")


if __name__ == "__main__":
  main()
