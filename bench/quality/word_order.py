r"""When does each network of a pretraining run start to use word order? Shuffle and compare.

  python bench/quality/word_order.py --vocab=bench/results/ablation/vocab.txt \
      --data=~/.cache/electra_tf/ablation/data \
      --runs=~/.cache/electra_tf/ablation/objectives/electra,~/.cache/electra_tf/ablation/objectives/mlm

For every checkpoint of every run (a pretrain.py --model_dir), on the same masked batches
twice, once as built and once with each sequence's tokens between [CLS] and the last [SEP]
shuffled (the masked slots follow their tokens, so every prediction has the same targets
and the same bag of context words):

- the generator's masked-LM accuracy (argmax at the masked positions);
- the replaced-token detector's AUC over every real token (electra and electra_15 runs),
  with the generator's samples as the corrupted input, as in training.

A network whose score does not drop under shuffling is a bag of words: it cannot use
which word comes next to which. Masked LMs leave that state long before a replaced-token
detector does at the sizes a CPU trains (docs/objectives.md, "Short runs"), and fine-tuning
an encoder that has not left it is no better than starting from random weights.

Dropout is off and samples come from the run's own counter-based draw (step 0). The
shuffle is seeded, so two invocations print the same figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(os.path.dirname(HERE)), HERE]

import numpy as np  # noqa: E402


def shuffled(batch: dict, rng: np.random.Generator) -> dict:
  """`batch` (numpy arrays of PRETRAIN_KEYS) with each row's inner tokens permuted.

  Position 0 ([CLS]) and the last real position ([SEP]) stay; the masked_lm_positions of a
  row move with their tokens, so masked_lm_ids and weights are unchanged.
  """
  from electra_tf import features as F  # noqa: PLC0415

  out = {k: v.copy() for k, v in batch.items()}
  length = batch[F.INPUT_IDS].shape[1]
  for row, n in enumerate(batch[F.INPUT_MASK].sum(1).astype(int)):
    source = np.arange(length)  # new position i holds the token of old position source[i]
    source[1:n - 1] = rng.permutation(np.arange(1, n - 1))
    for key in (F.INPUT_IDS, F.MASKED_INPUT_IDS, F.SEGMENT_IDS):
      out[key][row] = batch[key][row][source]
    real = batch[F.MASKED_LM_WEIGHTS][row] > 0
    moved_to = np.argsort(source)  # old position j is now at moved_to[j]
    out[F.MASKED_LM_POSITIONS][row][real] = moved_to[batch[F.MASKED_LM_POSITIONS][row][real]]
  return out


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
  """Area under the ROC curve (the Mann-Whitney statistic; ties count a half)."""
  _, index, counts = np.unique(scores, return_inverse=True, return_counts=True)
  ranks = (np.cumsum(counts) - (counts - 1) / 2)[index]  # 1-based, ties averaged
  positive = labels == 1
  n1, n0 = positive.sum(), (~positive).sum()
  if not n1 or not n0:
    return float("nan")
  return float((ranks[positive].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def scores(model, batches: list[dict]) -> dict:
  """{"gen_accuracy": .., "disc_auc": ..} of a built pretrainer on numpy batches."""
  import tensorflow as tf  # noqa: PLC0415

  from electra_tf import features as F  # noqa: PLC0415

  right = total = 0
  logits, labels = [], []
  for batch in batches:
    out = model.forward({k: tf.constant(v) for k, v in batch.items()},
                        step=tf.constant(0, tf.int64), training=False)
    weights = batch[F.MASKED_LM_WEIGHTS] > 0
    predicted = tf.argmax(out["gen_logits"], -1, output_type=tf.int32).numpy()
    right += int((predicted == batch[F.MASKED_LM_IDS])[weights].sum())
    total += int(weights.sum())
    if "disc_logits" in out:
      real = batch[F.INPUT_MASK].astype(bool)
      logits.append(tf.cast(out["disc_logits"], tf.float32).numpy()[real])
      labels.append(out["labels"].numpy()[real])
  result = {"gen_accuracy": right / max(total, 1)}
  if logits:
    result["disc_auc"] = auc(np.concatenate(logits), np.concatenate(labels))
  return result


def checkpoints_of(run: str) -> list[tuple[int, str]]:
  """[(step, prefix)] of a run's checkpoints, oldest first."""
  from electra_tf.training import resume  # noqa: PLC0415

  return sorted(resume.numbered(os.path.join(run, "checkpoints")))


def run_config(run: str):
  """The PretrainConfig of a pretrain.py --model_dir (a UserError if it has none)."""
  from electra_tf.errors import UserError  # noqa: PLC0415
  from electra_tf.training import artifacts  # noqa: PLC0415

  found = artifacts.read_run_config(run)
  if found is None:
    raise UserError(f"{run} has no config.json; give pretrain.py --model_dir directories")
  return found[1]


def probe_run(run: str, batches: list[dict], shuffled_batches: list[dict], log=print) -> list[dict]:
  """One row per checkpoint of `run`: its scores in order and shuffled."""
  import tensorflow as tf  # noqa: PLC0415
  import tf_keras  # noqa: PLC0415

  from electra_tf.training import pretraining  # noqa: PLC0415

  config = run_config(run)
  tf_keras.backend.clear_session()
  model = pretraining.build_model(config, tf.distribute.get_strategy(), fused_kernels=False)
  model({k: tf.constant(v) for k, v in batches[0].items()})
  rows = []
  for step, prefix in checkpoints_of(run):
    # Every checkpoint holds all of the model's variables: each read replaces them all.
    tf.train.Checkpoint(model=model).read(prefix).expect_partial()
    row = {"run": os.path.basename(os.path.normpath(run)), "objective": config.objective,
           "step": step}
    for name, value in scores(model, batches).items():
      row[name] = value
    for name, value in scores(model, shuffled_batches).items():
      row[name + "_shuffled"] = value
    log(format_row(row))
    rows.append(row)
  return rows


def format_row(row: dict) -> str:
  line = (f"{row['run']:>16} step {row['step']:>6}: generator accuracy "
          f"{row['gen_accuracy']:.3f} in order, {row['gen_accuracy_shuffled']:.3f} shuffled")
  if "disc_auc" in row:
    line += (f"; detector AUC {row['disc_auc']:.3f} in order, "
             f"{row['disc_auc_shuffled']:.3f} shuffled")
  return line


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--runs", required=True, help="comma-separated pretrain.py --model_dir's")
  parser.add_argument("--data", required=True,
                      help="a data dir built with the runs' vocab and sequence length")
  parser.add_argument("--vocab", required=True, help="the vocab the runs were trained with")
  parser.add_argument("--batches", type=int, default=16, help="batches of 128 sequences")
  parser.add_argument("--seed", type=int, default=0, help="masking and shuffling seed")
  parser.add_argument("--output", help="also write the rows here as JSON")
  args = parser.parse_args()

  from electra_tf import atomic  # noqa: PLC0415
  from electra_tf.cli import one_line_errors  # noqa: PLC0415
  from electra_tf.data import pipeline  # noqa: PLC0415
  from electra_tf.data.vocab import load_vocab  # noqa: PLC0415

  with one_line_errors():
    runs = [os.path.expanduser(r) for r in args.runs.split(",") if r]
    config = run_config(runs[0])
    dataset = pipeline.make_pretraining_dataset(
        os.path.expanduser(args.data), batch_size=128, max_seq_length=config.max_seq_length,
        max_predictions_per_seq=config.max_predictions_per_seq, mask_prob=config.mask_prob,
        vocab=load_vocab(os.path.expanduser(args.vocab)), mask_token_rate=config.mask_token_rate,
        seed=args.seed)
    batches = [{k: v.numpy() for k, v in b.items()} for b in dataset.take(args.batches)]
    rng = np.random.default_rng(args.seed)
    shuffled_batches = [shuffled(b, rng) for b in batches]
    rows = [row for run in runs for row in probe_run(run, batches, shuffled_batches)]
    if args.output:
      atomic.atomic_write_text(args.output, json.dumps(rows, indent=1))


if __name__ == "__main__":
  main()
