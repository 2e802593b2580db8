r"""The ELECTRA paper's ablations in miniature: pretrain each arm, fine-tune it, tabulate.

  python bench/quality/ablation.py --study=objectives       # Table 5 and Figure 4 in miniature
  python bench/quality/ablation.py --study=generator_size   # Figure 3 (left)
  python bench/quality/ablation.py --study=sharing          # weight tying, plus GDES
  python bench/quality/ablation.py --study=objectives --quick --workdir=/tmp/ablation  # toy budget
  python bench/quality/ablation.py --study=objectives --arms=electra,mlm --steps=12000 \
      --final_only --workdir=~/.cache/electra_tf/ablation_2x \
      --results_dir=bench/results/ablation/budget_2x

Every arm pretrains the same discriminator (MINIATURE) from scratch on the built-in corpus
(the Wikipedia paragraphs of SQuAD v1.1 train) with a WordPiece vocab learned from that
corpus, the same sequence length, batch, learning rate and schedule shape (warmup 10% of
the arm's steps, then linear decay). The objectives study gives every arm the electra
arm's pretraining FLOPs (electra_tf.model.flops: an arm with a costlier step gets fewer
steps); the other two give every arm the same steps and report FLOPs. Each encoder is then
fine-tuned on movie-review polarity and TREC question types with several seeds (see
study_lib.py), beside a row without pretraining.

Resumable: rerun the same command, on this machine or another. Checkpoints and TFRecords
are kept in --workdir (default ~/.cache/electra_tf/ablation, outside the checkout); the
ledger, bench/results/ablation/ (committed), keeps the learned vocab, each finished arm's
pretraining record and every finished fine-tuning run (a line in
`<study>/finetune/<task>.jsonl`). An arm is fine-tuned as soon as it has pretrained, so a
finished arm needs nothing from the workdir again; an interrupted arm resumes from its
newest checkpoint if the workdir survived, and starts over otherwise. The tables,
bench/results/ablation/<study>/ablation_<study>.{json,md} (and .png for the objectives
study), are rewritten after every arm.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RESULTS = os.path.join(os.path.dirname(HERE), "results", "ablation")  # the ledgers
sys.path[:0] = [ROOT, HERE]

import study_lib  # noqa: E402
from study_lib import MINIATURE, QUICK, base_config, parse_overrides, with_steps  # noqa: E402,F401,E501

from electra_tf import atomic  # noqa: E402
from electra_tf.config import PretrainConfig  # noqa: E402
from electra_tf.model import flops  # noqa: E402

ELECTRA_STEPS = 6000  # the electra arm's steps; the objectives study's FLOP budget
VOCAB_SIZE = 8192
SEEDS = (0, 1, 2, 3, 4)
QUICK_STEPS, QUICK_VOCAB, QUICK_ARTICLES, QUICK_SEEDS = 24, 1000, 6, (0, 1)

# GLUE dev from the paper (Clark et al. 2020, section 3.2-3.4), for the tables.
PAPER = {
    "objectives": {"electra": 85.0, "all_tokens_mlm": 84.3, "electra_15": 82.4,
                   "replace_mlm": 82.4, "mlm": 82.2, "two_stage": None},
    "sharing": {"none": 83.6, "tied": 84.3, "all": 84.4, "gdes": None},
    "generator_size": {},
}
# What the papers say where they give no figure per arm.
PAPER_NOTES = {
    "generator_size": "The paper (Figure 3, left) finds generators 1/4 to 1/2 of the "
                      "discriminator's width best.",
    "sharing": "The paper's sharing figures are with a generator as wide as the "
               "discriminator; DeBERTaV3 (He et al. 2021) reports gdes above tied and none "
               "for replaced-token detection.",
}


@dataclasses.dataclass(frozen=True)
class Arm:
  """One pretraining run of a study.

  Attributes:
    name: the arm's directory and row name.
    changes: PretrainConfig changes on top of the miniature.
    checkpoints_at: fractions of the run whose checkpoints are fine-tuned too.
    same_as: (study, arm) of another study whose run is this arm's (the same config);
      adopt_identical_run takes its finished records instead of pretraining it again.
  """

  name: str
  changes: dict
  checkpoints_at: tuple[float, ...] = ()
  same_as: tuple[str, str] | None = None


def arms(study: str, quick: bool = False) -> list[Arm]:
  """The arms of `study`, in the order they run (a toy budget fine-tunes one partial
  checkpoint per arm instead of three)."""
  if study == "objectives":
    quarters = (0.5,) if quick else (0.25, 0.5, 0.75)
    # The comparison users care about first, so an interrupted study has it soonest.
    return [Arm("electra", {}, quarters), Arm("mlm", {"objective": "mlm"}, quarters),
            Arm("all_tokens_mlm", {"objective": "all_tokens_mlm"}),
            Arm("electra_15", {"objective": "electra_15"}),
            Arm("replace_mlm", {"objective": "replace_mlm"}),
            Arm("two_stage", {"generator_fraction": 1.0, "embedding_sharing": "none",
                              "two_stage": True})]
  if study == "generator_size":
    # The miniature's generator is half as wide: that arm is the objectives study's electra.
    return [Arm(f"generator_{name}", {"generator_fraction": fraction},
                same_as=("objectives", "electra") if fraction == 0.5 else None)
            for name, fraction in (("1_8", 0.125), ("1_4", 0.25), ("1_2", 0.5), ("1", 1.0))]
  if study == "sharing":
    # Tied embeddings are the default: that arm is the generator-size study's widest.
    return [Arm(mode, {"generator_fraction": 1.0, "embedding_sharing": mode},
                same_as=("generator_size", "generator_1") if mode == "tied" else None)
            for mode in ("none", "tied", "all", "gdes")]
  raise ValueError(f"unknown study {study!r}")


def arm_config(study: str, arm: Arm, base: PretrainConfig, steps: int) -> PretrainConfig:
  """The arm's config: equal FLOPs (objectives) or equal steps (the other studies)."""
  changes = {k: v for k, v in arm.changes.items() if k != "two_stage"}
  two_stage = arm.changes.get("two_stage", False)
  config = base.replace(**changes) if changes else base
  if study != "objectives":
    return with_steps(config, steps, two_stage)
  budget = flops.run_flops(with_steps(base, steps))
  candidate = with_steps(config, steps, two_stage)
  per_step = flops.run_flops(candidate) / steps  # two-stage: the mean over its stages
  return with_steps(config, int(budget // per_step), two_stage)


def adopt_identical_run(ledger_root: str, study: str, arm: Arm, config: PretrainConfig,
                        base: PretrainConfig, steps: int, seeds: list[int], quick: bool,
                        log=print) -> bool:
  """Fills the ledger's records of `arm` from the run `arm.same_as` names, if that is the
  same run: both ledgers hold the same settings, the two arms' configs are equal, that run
  is finished (its pretraining record and every fine-tuning run), this ledger has no
  pretraining record of its own for `arm`, and any fine-tuning run of `arm` already here
  agrees with that run's (every field but the time taken). Returns whether it was taken; a
  study pretrains the arm itself otherwise. Arms whose partial checkpoints are fine-tuned
  too are never adopted (only final encoders are copied)."""
  if arm.same_as is None:
    return False
  other_study, other_name = arm.same_as
  source = f"{other_study}/{other_name}"
  other_arm = next(a for a in arms(other_study, quick) if a.name == other_name)
  ledger, other_ledger = (os.path.join(ledger_root, s) for s in (study, other_study))
  recorded = []
  for path in (os.path.join(d, "settings.json") for d in (ledger, other_ledger)):
    if os.path.exists(path):
      with open(path, encoding="utf-8") as f:
        recorded.append(json.load(f))
  record_path = os.path.join(other_ledger, "pretrain", f"{other_name}.json")
  other_finetune = os.path.join(other_ledger, "finetune")
  own_record = os.path.join(ledger, "pretrain", f"{arm.name}.json")
  own = None
  if os.path.exists(own_record):
    with open(own_record, encoding="utf-8") as f:
      own = json.load(f)
  why = None
  if own is not None and own.get("same_run") != source:
    why = f"this ledger has its own run of {arm.name}"
  elif arm.checkpoints_at:
    why = "its partial checkpoints are fine-tuned too"
  elif len(recorded) < 2 or recorded[0] != recorded[1]:
    why = f"{other_ledger} holds other settings or none"
  elif arm_config(other_study, other_arm, base, steps) != config:
    why = f"{source} has another config"
  elif not os.path.exists(record_path) or study_lib.pending(
      {other_name: None}, seeds, other_finetune, quick):
    why = f"{source} has not finished"
  copies = {}
  for setting in study_lib.settings(quick).values():
    if why:
      break
    name = f"{setting.name}.jsonl"
    theirs = {r["seed"]: r for r in study_lib.read_jsonl(
        os.path.join(other_finetune, name)) if r["encoder"] == other_name and r["seed"] in seeds}
    ours = {r["seed"]: r for r in study_lib.read_jsonl(
        os.path.join(ledger, "finetune", name)) if r["encoder"] == arm.name}
    if any(_result(r) != _result(theirs.get(seed, {})) for seed, r in ours.items()):
      why = f"this ledger's {arm.name} runs differ from {source}'s"
    copies[name] = [{**theirs[seed], "encoder": arm.name, "same_run": source}
                    for seed in seeds if seed not in ours]
  if why:
    log(f"arm {arm.name}: pretrained here ({why})")
    return False
  with open(record_path, encoding="utf-8") as f:
    record = {**json.load(f), "same_run": source}
  os.makedirs(os.path.join(ledger, "pretrain"), exist_ok=True)
  atomic.atomic_write_text(os.path.join(ledger, "pretrain", f"{arm.name}.json"),
                           json.dumps(record, indent=2))
  os.makedirs(os.path.join(ledger, "finetune"), exist_ok=True)
  for name, lines in copies.items():
    with open(os.path.join(ledger, "finetune", name), "a", encoding="utf-8") as f:
      f.writelines(json.dumps(line) + "\n" for line in lines)
  log(f"arm {arm.name}: the same run as {source}; its records are taken from that ledger")
  return True


def _result(record: dict) -> dict:
  """A fine-tuning record's outcome: every field but its encoder's name, provenance and
  time taken."""
  return {k: v for k, v in record.items() if k not in ("encoder", "same_run", "seconds")}


def prepare_data(workdir: str, ledger_root: str, quick: bool, log=print,
                 seq_len: int | None = None):
  """(vocab path, data dir): a vocab learned from the built-in corpus, and its TFRecords.

  The vocab lives in the ledger, so every machine that resumes a study reads the same one.
  """
  from electra_tf.data import builtin, pretraining_data, vocab_learning  # noqa: PLC0415
  from electra_tf.data.tokenizer_spec import TokenizerSpec  # noqa: PLC0415

  corpus = builtin.builtin_corpus(builtin.default_cache_dir(),
                                  max_articles=QUICK_ARTICLES if quick else None)
  vocab_path = os.path.join(ledger_root, "vocab.txt")
  if not os.path.exists(vocab_path):
    os.makedirs(ledger_root, exist_ok=True)
    start = time.time()
    # BERT's uncased WordPiece settings, as the committed ledger's vocab was learned with.
    learned = vocab_learning.learn_vocab(corpus, QUICK_VOCAB if quick else VOCAB_SIZE,
                                TokenizerSpec(), output_path=vocab_path)
    log(f"learned a {learned.size}-token vocab in {time.time() - start:.0f}s")
  default_len = (QUICK if quick else MINIATURE)["max_seq_length"]
  seq_len = seq_len or default_len
  name = "data" if seq_len == default_len else f"data-{seq_len}"
  data_dir = pretraining_data.build_if_needed(
      corpus, vocab_path, os.path.join(workdir, name), seq_len, show_progress=False)
  return vocab_path, data_dir


def pretrain_arm(config: PretrainConfig, model_dir: str, vocab_path: str, data_dir: str,
                 log=print, fused_kernels: bool = True, commit: str | None = None) -> dict:
  """Pretrains (or resumes) one arm; its done.json once finished (`commit`: the code that
  runs it, default the checkout's now)."""
  done_path = os.path.join(model_dir, "done.json")
  if os.path.exists(done_path):
    with open(done_path, encoding="utf-8") as f:
      return json.load(f)
  import tf_keras  # noqa: PLC0415

  from electra_tf.data import manifest as manifest_lib  # noqa: PLC0415
  from electra_tf.data.vocab import load_vocab  # noqa: PLC0415
  from electra_tf.training import pretraining, strategy  # noqa: PLC0415

  tf_keras.backend.clear_session()
  strategy.set_precision(config.precision)
  manifest = manifest_lib.read_manifest(data_dir)
  data = pretraining.TrainData(manifest.shard_paths, load_vocab(vocab_path),
                               manifest.examples, manifest.tokens)
  start = time.time()
  os.makedirs(model_dir, exist_ok=True)
  with open(os.path.join(model_dir, "log.txt"), "a", encoding="utf-8") as stream:
    result = pretraining.run_pretraining(config, data, model_dir,
                                         strategy.make_strategy("one_device"), stream=stream,
                                         fused_kernels=fused_kernels)
  last = result.history[-1] if result.history else {}
  record = {"steps": config.num_train_steps, "flops": flops.run_flops(config),
            "commit": commit or _commit(), "cpu": _cpu(),
            "seconds_this_process": round(time.time() - start),
            "final_metrics": {k: round(float(v), 4) for k, v in last.items()
                              if isinstance(v, (int, float))}}
  atomic.atomic_write_text(done_path, json.dumps(record, indent=2))
  log(f"pretrained {model_dir}: {record['steps']} steps, {record['flops'] / 1e15:.2f} PFLOP")
  return record


def encoders_to_finetune(work: str, arm: Arm, config: PretrainConfig,
                         partials: bool = True) -> dict:
  """{row name: checkpoint} for the arm's final discriminator and (`partials`) its partial
  checkpoints."""
  model_dir = os.path.join(work, arm.name)
  out = {arm.name: os.path.join(model_dir, "discriminator")}
  for fraction in arm.checkpoints_at if partials else ():
    step = int(round(fraction * config.num_train_steps))
    out[f"{arm.name}@{fraction:.0%}"] = os.path.join(model_dir, "checkpoints", f"ckpt-{step}")
  return out


def summarise(study: str, plan, scores: dict, pretrain: dict) -> dict:
  """Per row: mean and standard error per task and of the per-seed task average."""
  rows = {}
  configs = {arm.name: config for arm, config in plan}
  for name in scores[next(iter(scores))]:
    row = {}
    per_seed_average = None
    for task, by_encoder in scores.items():
      values = [100 * v for v in by_encoder[name]]
      mean, stderr = study_lib.mean_and_stderr(values)
      row[task] = {"mean": round(mean, 2), "stderr": round(stderr, 2), "seeds": values}
      per_seed_average = values if per_seed_average is None else [
          (a + b) for a, b in zip(per_seed_average, values)]
    average = [v / len(scores) for v in per_seed_average]
    mean, stderr = study_lib.mean_and_stderr(average)
    row["average"] = {"mean": round(mean, 2), "stderr": round(stderr, 2)}
    arm_name, _, fraction = name.partition("@")
    if arm_name in configs:
      config = configs[arm_name]
      steps = config.num_train_steps
      if fraction:
        steps = int(round(float(fraction.rstrip("%")) / 100 * steps))
      row["pretrain_steps"] = steps
      row["pretrain_flops"] = flops.run_flops(config, steps)
      if not fraction:
        row["pretrain"] = pretrain.get(arm_name, {})
    row["paper_glue"] = PAPER.get(study, {}).get(name)
    rows[name] = row
  return rows


def markdown(study: str, rows: dict, meta: dict) -> str:
  first = next(iter(rows.values()))
  tasks = [t for t, value in first.items() if isinstance(value, dict) and "seeds" in value]
  head = ["arm", "pretrain PFLOP", *tasks, "average", "paper GLUE"]
  lines = [f"### Ablation: {study}", "",
           f"Command: `{meta['command']}`; commit {meta['commit']}; {meta['cpu']}; "
           f"wall time {meta['wall_time']}. Fine-tuning accuracy (%) on the dev sets, mean "
           f"± standard error over seeds {list(meta['seeds'])}.", "",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  ordered = sorted(rows.items(), key=lambda kv: -kv[1]["average"]["mean"])
  for name, row in ordered:
    cells = [name, f"{row.get('pretrain_flops', 0) / 1e15:.2f}"]
    cells += [f"{row[t]['mean']:.2f} ± {row[t]['stderr']:.2f}" for t in tasks]
    cells.append(f"**{row['average']['mean']:.2f} ± {row['average']['stderr']:.2f}**")
    cells.append("" if row.get("paper_glue") is None else f"{row['paper_glue']}")
    lines.append("| " + " | ".join(cells) + " |")
  if study in PAPER_NOTES:
    lines += ["", PAPER_NOTES[study]]
  shared = [f"{name} is {row['pretrain']['same_run']}" for name, row in ordered
            if row.get("pretrain", {}).get("same_run")]
  if shared:
    lines += ["", f"The same run as another study's arm (same config and settings; its "
              f"records are copied from that ledger): {'; '.join(shared)}."]
  made: dict[tuple[str, str], list[str]] = {}
  for name, row in ordered:
    if "pretrain" in row:  # a final encoder; its record says where it was pretrained
      record = row["pretrain"]
      made.setdefault((record.get("cpu", "a CPU not recorded"),
                       record.get("commit", "a commit not recorded")), []).append(name)
  if made:
    lines += ["", "Pretrained on: " + "; ".join(
        f"{', '.join(names)}: {cpu}, {commit}" for (cpu, commit), names in made.items()) + "."]
  return "\n".join(lines) + "\n"


def plot(rows: dict, path: str) -> None:
  """Downstream average against pretraining FLOPs for electra and mlm (Figure 4)."""
  import matplotlib  # noqa: PLC0415

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # noqa: PLC0415

  fig, ax = plt.subplots(figsize=(6, 4))
  for arm, colour in (("electra", "tab:blue"), ("mlm", "tab:orange")):
    points = sorted((row["pretrain_flops"] / 1e15, row["average"]["mean"],
                     row["average"]["stderr"]) for name, row in rows.items()
                    if name.split("@")[0] == arm)
    xs, ys, es = zip(*points)
    ax.errorbar(xs, ys, yerr=es, marker="o", capsize=3, label=arm, color=colour)
  random = rows["random"]["average"]
  ax.axhline(random["mean"], color="grey", linestyle="--", label="no pretraining")
  ax.set_xlabel("pretraining PFLOPs")
  ax.set_ylabel("fine-tuning accuracy, task average (%)")
  ax.set_title("Downstream score against pretraining compute")
  ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=120)


def _cpu() -> str:
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      info = f.read()
    model = next(line.split(":", 1)[1].strip() for line in info.splitlines()
                 if line.startswith("model name"))
    amx = "with AMX" if "amx_bf16" in info else "no AMX"
    return f"{model} ({amx}), {os.cpu_count()} cores"
  except (OSError, StopIteration):
    return platform.processor() or "unknown CPU"


def _commit() -> str:
  """The checkout's commit, with "+changes" where its code (not the ledgers) differs."""
  try:
    def git(*args: str) -> str:
      return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True,
                            text=True).stdout.strip()

    changed = git("status", "--porcelain", "--untracked-files=no", "--", "electra_tf",
                  "configs", "pretrain.py", "finetune.py", ":(glob)bench/**/*.py")
    return git("rev-parse", "--short", "HEAD") + ("+changes" if changed else "")
  except (OSError, subprocess.CalledProcessError):
    return "unknown"


def _command_line(argv: list[str]) -> str:
  """The study's command as a user reruns it from the checkout: paths inside the
  repository relative to its root (the table is read in a clone, not on this disk)."""

  def relative(arg: str) -> str:
    flag, eq, value = arg.partition("=")
    if eq and os.path.isabs(value) and value.startswith(ROOT + os.sep):
      arg = f"{flag}={os.path.relpath(value, ROOT)}"
    # Quoted where a shell would split or expand it (JSON overrides); "~" is left as
    # typed, since the study expands it itself. An empty argument is quoted too, or a
    # shell would drop it.
    return arg if re.fullmatch(r"[\w@%+=:,./~-]+", arg) else shlex.quote(arg)

  return " ".join(["python", "bench/quality/ablation.py", *map(relative, argv)])


def _check_settings(ledger: str, quick: bool, steps: int, seeds: list[int],
                    overrides: dict | None = None) -> None:
  """Records what the results in `ledger` (the ledger, or the workdir of the arms'
  checkpoints) depend on; refuses to resume under other settings (arms or rows made with
  another miniature or fine-tuning protocol would be mixed with incomparable ones)."""
  settings = {"miniature": QUICK if quick else MINIATURE, "electra_steps": steps,
              "seeds": seeds, "tasks": {name: dataclasses.asdict(task) for name, task in
                                        study_lib.settings(quick).items()},
              "finetune": dataclasses.asdict(study_lib.RECIPE)}
  if overrides:
    settings["miniature_overrides"] = overrides
  settings = json.loads(json.dumps(settings))
  path = os.path.join(ledger, "settings.json")
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      recorded = json.load(f)
    if recorded != settings:
      raise SystemExit(f"error: {ledger} holds results made with other settings ({path}); "
                       "move it away to start this study over, or restore those settings")
    return
  if os.path.isdir(ledger) and os.listdir(ledger):
    raise SystemExit(f"error: {ledger} holds results of unknown settings (no {path}); move "
                     "it away to start this study over")
  os.makedirs(ledger, exist_ok=True)
  atomic.atomic_write_text(path, json.dumps(settings, indent=2))


def _write_results(study: str, ledger: str, plan, scores: dict, pretrain: dict,
                   meta: dict, log=print, only_arms: list[str] | None = None) -> dict:
  """Writes ablation_<study>.{json,md,png} in `ledger` from the rows finished so far
  (pending: the arms of `plan`, or of `only_arms`, without a row yet)."""
  rows = summarise(study, plan, scores, pretrain) if scores else {}
  pending = [arm.name for arm, _ in plan
             if arm.name not in rows and (not only_arms or arm.name in only_arms)]
  result = {"study": study, "meta": meta, "rows": rows, "pending_arms": pending}
  stem = os.path.join(ledger, f"ablation_{study}")
  atomic.atomic_write_text(stem + ".json", json.dumps(result, indent=2))
  table = markdown(study, rows, meta) if rows else f"### Ablation: {study}\n"
  if pending:
    table += f"\nStill to run: {', '.join(pending)}.\n"
  atomic.atomic_write_text(stem + ".md", table)
  if study == "objectives" and {"electra", "mlm", "random"} <= set(rows):
    plot(rows, stem + ".png")
  planned = len(only_arms) if only_arms else len(plan)
  log(f"wrote {stem}.json and .md ({planned - len(pending)} of {planned} arms)")
  return result


def run_study(study: str, workdir: str, quick: bool = False, results_dir: str | None = None,
              log=print, overrides: dict | None = None, steps: int | None = None,
              only_arms: list[str] | None = None, final_only: bool = False) -> dict:
  """Runs (or resumes) one study; returns its results.

  Args:
    workdir: arms' checkpoints and the TFRecords (`<workdir>/<study>/<arm>/`).
    results_dir: the ledger, kept across machines (commit it): the vocab, each finished
      arm's pretraining record (`<study>/pretrain/<arm>.json`), every finished fine-tuning
      run (`<study>/finetune/<task>.jsonl`) and the tables. An arm whose fine-tuning runs are
      all in the ledger is not run again, even where its checkpoints are gone; the tables are
      rewritten after every arm. Default: `workdir`.
    overrides: changes to the miniature (base_config); recorded with the ledger's settings,
      so a ledger holds results of one miniature only. A sequence length other than the
      miniature's reads its own TFRecords (`<workdir>/data-<length>`).
    steps: the electra arm's steps (the FLOP budget of the objectives study, the steps of
      the others); default ELECTRA_STEPS.
    only_arms: run these arms of the study and no others (the tables name the rest pending).
    final_only: fine-tune each arm's final encoder only, not its partial checkpoints.
  """
  study_arms = arms(study, quick)
  unknown = set(only_arms or ()) - {arm.name for arm in study_arms}
  if unknown:
    raise SystemExit(f"error: no arm {', '.join(sorted(unknown))} in the {study} study; its "
                     f"arms are {', '.join(arm.name for arm in study_arms)}")
  from electra_tf.errors import UserError  # noqa: PLC0415

  try:  # unknown keys or values fail here, before any data or training
    base_config(quick, 100, overrides)
  except UserError as exc:
    raise SystemExit(f"error: --config_overrides: {exc}") from exc
  started = time.time()
  ledger_root = results_dir or workdir
  ledger = os.path.join(ledger_root, study)
  work = os.path.join(workdir, study)
  os.makedirs(work, exist_ok=True)
  seq_len = (overrides or {}).get("max_seq_length")
  vocab_path, data_dir = prepare_data(workdir, ledger_root, quick, log, seq_len)
  from electra_tf.data.vocab import load_vocab  # noqa: PLC0415

  base = base_config(quick, load_vocab(vocab_path).size, overrides)
  steps = steps or (QUICK_STEPS if quick else ELECTRA_STEPS)
  seeds = list(QUICK_SEEDS if quick else SEEDS)
  plan = [(arm, arm_config(study, arm, base, steps)) for arm in study_arms]
  meta = {"command": _command_line(sys.argv[1:]) if not quick
          else f"python bench/quality/ablation.py --study={study} --quick", "commit": _commit(),
          "cpu": _cpu(), "seeds": seeds, "miniature": QUICK if quick else MINIATURE,
          "vocab_size": base.model.vocab_size, "miniature_overrides": overrides or {},
          "electra_steps": steps}
  finetune_dir = os.path.join(ledger, "finetune")
  for results in (ledger, work):
    _check_settings(results, quick, steps, seeds, overrides)

  worked = False  # whether this invocation pretrained or fine-tuned anything

  def finetune(encoders: dict) -> dict:
    nonlocal worked
    worked = worked or bool(study_lib.pending(encoders, seeds, finetune_dir, quick))
    return study_lib.finetune_all(base.model, vocab_path, encoders, seeds,
                                          finetune_dir, quick=quick, log=log)

  def record_meta() -> dict:
    """This invocation's command, commit, CPU and wall time; where it only rewrote the
    tables (or took another study's run), those of the last invocation that ran arms."""
    previous = os.path.join(ledger, f"ablation_{study}.json")
    if not worked and os.path.exists(previous):
      with open(previous, encoding="utf-8") as f:
        before = json.load(f)["meta"]
      return {**meta, **{k: before[k] for k in ("command", "commit", "cpu", "wall_time")
                         if k in before}}
    return {**meta, "wall_time": f"{(time.time() - started) / 60:.0f} min in the last "
            "invocation that ran arms"}

  all_encoders = {"random": None}
  finetune(all_encoders)
  pretrain = {}

  def write_tables() -> dict:
    """The tables of every arm finished in the ledger, this invocation's or another's (one
    running beside it with other --arms)."""
    encoders, records = dict(all_encoders), dict(pretrain)
    for arm, config in plan:
      record_path = os.path.join(ledger, "pretrain", f"{arm.name}.json")
      theirs = encoders_to_finetune(work, arm, config, partials=not final_only)
      if arm.name in records or not os.path.exists(record_path) or study_lib.pending(
          theirs, seeds, finetune_dir, quick):
        continue
      with open(record_path, encoding="utf-8") as f:
        records[arm.name] = json.load(f)
      encoders.update(theirs)
    return _write_results(study, ledger, plan, finetune(encoders), records, record_meta(),
                          log, only_arms)

  for arm, config in plan:
    if only_arms and arm.name not in only_arms:
      continue
    record_path = os.path.join(ledger, "pretrain", f"{arm.name}.json")
    encoders = encoders_to_finetune(work, arm, config, partials=not final_only)
    all_encoders.update(encoders)
    finished = os.path.exists(record_path) and not study_lib.pending(
        encoders, seeds, finetune_dir, quick)
    if not finished and not adopt_identical_run(ledger_root, study, arm, config, base, steps,
                                                seeds, quick, log):
      worked = True
      log(f"arm {arm.name}: {config.num_train_steps} steps, "
          f"{flops.run_flops(config) / 1e15:.3f} PFLOP")
      # A toy run skips the fused kernels: their XLA compiles would dominate its minutes.
      record = pretrain_arm(config, os.path.join(work, arm.name), vocab_path, data_dir, log,
                            fused_kernels=not quick, commit=meta["commit"])
      os.makedirs(os.path.dirname(record_path), exist_ok=True)
      atomic.atomic_write_text(record_path, json.dumps(record, indent=2))
    with open(record_path, encoding="utf-8") as f:
      pretrain[arm.name] = json.load(f)
    finetune(all_encoders)
    if not finished:
      write_tables()
  return write_tables()


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--study", required=True, choices=["objectives", "generator_size",
                                                          "sharing"])
  parser.add_argument("--quick", action="store_true", help="toy budget (the test suite's)")
  parser.add_argument("--workdir", default=None,
                      help="where arms and fine-tuning runs are kept (default: the electra_tf "
                      "cache, ~/.cache/electra_tf/ablation, outside the checkout)")
  parser.add_argument("--results_dir", default=None,
                      help="the ledger (default: bench/results/ablation; the workdir with "
                      "--quick)")
  parser.add_argument("--config_overrides", default=None,
                      help="JSON changes to the miniature, as pretrain.py's flag takes them "
                      "(for example '{\"model.embedding_size\": 128}'); use a ledger and "
                      "workdir of their own")
  parser.add_argument("--steps", type=int, default=None,
                      help=f"the electra arm's steps (default {ELECTRA_STEPS})")
  parser.add_argument("--arms", default=None,
                      help="comma-separated arms to run (default: all of the study's)")
  parser.add_argument("--final_only", action="store_true",
                      help="fine-tune each arm's final encoder only, not the objectives "
                      "study's checkpoints at 25/50/75%% of its budget")
  args = parser.parse_args()
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  results = args.results_dir or (None if args.quick else
                                  RESULTS)
  if args.workdir is None:
    from electra_tf.data import builtin  # noqa: PLC0415

    args.workdir = os.path.join(builtin.default_cache_dir(), "ablation")

  def log(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)

  args.workdir = os.path.expanduser(args.workdir)
  results = os.path.expanduser(results) if results else results
  run_study(args.study, args.workdir, args.quick, results, log,
            parse_overrides(args.config_overrides), args.steps,
            args.arms.split(",") if args.arms else None, args.final_only)


if __name__ == "__main__":
  main()
