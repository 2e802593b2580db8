"""Fine-tunes given checkpoints on the quality studies' tasks with their protocol (study_lib).

  python bench/quality/ablation_finetune.py --results_dir=/tmp/ft \\
      --encoders=random=random,mlm=$RUN/discriminator --tasks=movie_reviews
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(os.path.dirname(HERE), "results", "ablation")
sys.path[:0] = [os.path.dirname(os.path.dirname(HERE)), HERE]

from study_lib import (  # noqa: E402
  AUTHORS_RECIPE,
  AUTHORS_TASKS,
  PARTS,
  RECIPE,
  TASKS,
  base_config,
  finetune_all,
  mean_and_stderr,
  parse_overrides,
  record_settings,
)


def main() -> None:
  """Fine-tunes given checkpoints on the study's tasks and prints each task's mean and
  standard error; by default with the study's recipe, sizes, epochs and seeds.

  python bench/quality/ablation_finetune.py --results_dir=/tmp/ft \\
      --encoders=random=random,mlm=$RUN/discriminator,mlm_emb=$RUN/discriminator@embeddings \\
      --config_overrides='{"model.embedding_size": 128}' \\
      --protocol=authors --pooling=mean --tasks=movie_reviews
  """
  from electra_tf.data.vocab import load_vocab  # noqa: PLC0415

  parser = argparse.ArgumentParser(description=main.__doc__.split("\n\n")[0])
  parser.add_argument("--encoders", required=True,
                      help="comma-separated name=checkpoint pairs (any checkpoint the convert "
                           "command reads); name=random for a random initialisation; "
                           "checkpoint@embeddings or checkpoint@layers restores only that part "
                           "and draws the rest at random")
  parser.add_argument("--results_dir", required=True,
                      help="one <task>.jsonl per task; finished (encoder, seed) runs are kept "
                           "and not rerun; settings.json records how they were made")
  parser.add_argument("--vocab", default=os.path.join(RESULTS, "vocab.txt"))
  parser.add_argument("--seeds", default="0,1,2")
  parser.add_argument("--config_overrides", default=None,
                      help="the encoders' sizes as changes to the study's miniature, as "
                           "ablation.py takes them")
  parser.add_argument("--tasks", default=",".join(TASKS), help="which of " + ", ".join(TASKS))
  parser.add_argument("--protocol", choices=["study", "authors"], default="study",
                      help="the defaults of the flags below: the study's (RECIPE, TASKS) or "
                           "the authors' ELECTRA-Small recipe (AUTHORS_RECIPE, AUTHORS_TASKS)")
  parser.add_argument("--learning_rate", type=float)
  parser.add_argument("--layerwise_lr_decay", type=float)
  parser.add_argument("--adam_bias_correction", choices=["true", "false"])
  parser.add_argument("--pooling", choices=["cls", "mean"],
                      help="what the classification head reads (FinetuneConfig.pooling)")
  parser.add_argument("--epochs", type=int, help="epochs for every task")
  parser.add_argument("--max_train_examples", type=int,
                      help="train on the first N examples of each task's training split "
                           "(0: all of it)")
  parser.add_argument("--max_seq_length", type=int,
                      help="tokens per example for every task (longer ones are truncated)")
  args = parser.parse_args()
  base_recipe, base_tasks = ((RECIPE, TASKS) if args.protocol == "study"
                             else (AUTHORS_RECIPE, AUTHORS_TASKS))
  encoders, parts = {}, {}
  for item in args.encoders.split(","):
    name, _, path = item.partition("=")
    if not name or not path:
      raise SystemExit(f"error: --encoders item {item!r} is not name=checkpoint")
    path, _, part = path.partition("@")
    if part and part not in PARTS:
      raise SystemExit(f"error: --encoders item {item!r}: after @ comes one of {PARTS}")
    if part:
      parts[name] = part
    encoders[name] = None if path == "random" else os.path.expanduser(path)
  unknown = set(args.tasks.split(",")) - set(TASKS)
  if unknown:
    raise SystemExit(f"error: unknown --tasks {sorted(unknown)}; choose from {list(TASKS)}")
  tasks = {}
  for name in args.tasks.split(","):
    changes = {}
    if args.epochs is not None:
      changes["epochs"] = args.epochs
    if args.max_train_examples is not None:
      changes["max_train_examples"] = args.max_train_examples or None
    if args.max_seq_length is not None:
      changes["max_seq_length"] = args.max_seq_length
    tasks[name] = dataclasses.replace(base_tasks[name], **changes)
  given = {"learning_rate": args.learning_rate, "layerwise_lr_decay": args.layerwise_lr_decay,
           "pooling": args.pooling, "adam_bias_correction": (
               None if args.adam_bias_correction is None else args.adam_bias_correction == "true")}
  recipe = dataclasses.replace(base_recipe, **{k: v for k, v in given.items() if v is not None})
  vocab = load_vocab(args.vocab)
  overrides = parse_overrides(args.config_overrides)
  config = base_config(False, vocab.size, overrides).model
  seeds = [int(s) for s in args.seeds.split(",")]
  # The results of one directory must come from one way of fine-tuning.
  settings_now = json.loads(json.dumps(
      {"recipe": dataclasses.asdict(recipe), "encoder": dataclasses.asdict(config),
       "vocab_md5": vocab.md5, "parts": parts,
       "tasks": {k: dataclasses.asdict(v) for k, v in tasks.items()}}))
  record_settings(args.results_dir, settings_now)
  scores = finetune_all(config, args.vocab, encoders, seeds, args.results_dir, recipe=recipe,
                        tasks=tasks, parts=parts)
  for task, rows in scores.items():
    for name, values in rows.items():
      mean, se = mean_and_stderr(values)
      print(f"{task} {name}: {100 * mean:.2f} ± {100 * se:.2f} ({len(values)} seeds)")


if __name__ == "__main__":
  main()
