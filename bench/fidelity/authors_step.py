r"""Our pretraining step beside the authors' (google-research/electra), step for step.

  python bench/fidelity/authors_step.py --electra_repo=/tmp/electra_authors
  python bench/fidelity/authors_step.py --electra_repo=PATH --cases=tiny:0.25 --steps=2
  python bench/fidelity/authors_step.py --electra_repo=PATH --their_adam_constants=both

For each case (preset : generator width as a fraction of the discriminator's; tied
embeddings), our ElectraPretrainer is built with dropout off and the authors' optimizer
settings (AdamW without bias correction, weight decay 0.01 except LayerNorm and biases,
clipping at global norm 1, warmup then linear decay from step 0), its initial weights are
written with our TF1 export (electra_tf/checkpoints/tf1_writer.py, what `electra-convert
--to=tf1` writes), and the authors' graph (authors_lib.py: their PretrainingModel and
create_optimizer under tf.compat.v1, shims listed there) reads them. Both then take
--steps steps from step --start_step on the same batches of the built-in corpus: our
masking and our generator samples are fed into their graph where it would draw its own.
Compared per step: the generator, discriminator and total losses, every gradient (before
clipping), and every weight after the update, each as max |ours - theirs| / max |theirs|
(a tensor smaller than 1e-4 of the largest of its kind, such as an attention key bias's
gradient, which is 0 in exact arithmetic, is measured against that floor).

Then the masking itself, which cannot be fed: over --mask_batches batches x --mask_repeats
draws, our pipeline's masking (electra_tf/data/pipeline.py) against their mask() on the same
token ids: predictions per sequence, distinct positions, the [MASK] share, where positions
fall, and whether [CLS], [SEP] or padding is ever chosen.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [ROOT, HERE]

import numpy as np  # noqa: E402
from authors_lib import (  # noqa: E402
  AuthorsStep,
  authors_commit,
  install_shims,
  mask_stats,
  their_config,
  their_masks,
)

LOSSES = ("gen_loss", "disc_loss", "loss")


def our_config(preset: str, fraction: float, args):
  """The preset with dropout off and the authors' optimizer settings, its generator as
  their get_generator_config derives it (max(1, width // 64) heads: for tiny at 1/1, where
  our derivation keeps the discriminator's 2 heads, the authors' code builds 1)."""
  import dataclasses

  from electra_tf import presets

  config = presets.get(preset).replace(**{
      "model.dropout_rate": 0.0, "model.attention_dropout_rate": 0.0,
      "generator_fraction": fraction, "batch_size": args.batch_size, "learning_rate": 5e-4,
      "warmup_steps": args.start_step, "num_train_steps": 1000, "steps_per_execution": 1,
      "precision": "float32", "adam_bias_correction": False, "weight_decay": 0.01,
      "optimizer": "adamw", "embedding_sharing": "tied", "objective": "electra"})
  width = int(round(config.model.hidden_size * fraction))
  theirs = dataclasses.replace(config.model, hidden_size=width, num_heads=max(1, width // 64),
                               intermediate_size=4 * width)
  return config if config.generator == theirs else config.replace(generator=theirs)


def shape_of(config) -> dict:
  m, g = config.model, config.generator
  return {"vocab_size": m.vocab_size, "embedding_size": m.embedding_size,
          "hidden_size": m.hidden_size, "num_hidden_layers": m.num_layers,
          "num_attention_heads": m.num_heads, "intermediate_size": m.intermediate_size,
          "generator_fraction": g.hidden_size / m.hidden_size,
          "seq_length": config.max_seq_length, "batch_size": config.batch_size,
          "mask_prob": config.mask_prob, "learning_rate": config.learning_rate,
          "num_train_steps": config.num_train_steps, "warmup_steps": config.warmup_steps,
          "weight_decay": config.weight_decay}


def batches(config, vocab, workdir: str, count: int) -> list[dict]:
  """`count` batches of the built-in corpus, masked by our pipeline (numpy)."""
  from electra_tf.data import builtin, pipeline, pretraining_data

  data = os.path.join(workdir, f"data_{config.max_seq_length}")
  if not os.path.exists(data):
    corpus = builtin.builtin_corpus(os.path.join(workdir, "corpus"), max_articles=12)
    pretraining_data.build_pretraining_data(corpus, vocab, data,
                                            max_seq_length=config.max_seq_length,
                                            num_workers=1, show_progress=False)
  dataset = pipeline.make_pretraining_dataset(
      data, batch_size=config.batch_size, max_seq_length=config.max_seq_length,
      max_predictions_per_seq=config.max_predictions_per_seq, mask_prob=config.mask_prob,
      vocab=vocab, shuffle=False, seed=0, deterministic=True)
  return list(dataset.take(count).as_numpy_iterator())


def our_steps(config, data: list[dict], start: int, tf1_dir: str | None, vocab_path: str,
              lr_step_offset: int = 0, fused_kernels: bool = True,
              initial: dict | None = None) -> dict:
  """Our losses, gradients (authors' names), samples and weights after each step; writes
  the initial weights to `tf1_dir` with our TF1 export. `lr_step_offset` 1 evaluates our
  schedule one step ahead, as the authors' graph does when it has already incremented
  global_step (see the module docstring)."""
  import tensorflow as tf
  import tf_keras

  from electra_tf.checkpoints import names, tf1_writer
  from electra_tf.training import pretraining

  tf_keras.utils.set_random_seed(config.seed)
  model = pretraining.build_model(config, tf.distribute.get_strategy(),
                                  fused_kernels=fused_kernels)
  if lr_step_offset:
    schedule = model.optimizer._get_hyper("learning_rate")  # noqa: SLF001
    model.optimizer._set_hyper("learning_rate",  # noqa: SLF001
                               lambda: schedule(model.optimizer.iterations + lr_step_offset))
  model({k: tf.constant(v) for k, v in data[0].items()})
  bindings = names.bindings(model.generator, model.discriminator)
  if initial is not None:  # the same starting weights as another run of ours
    for b in bindings:
      b.variable.assign(initial[b.name].reshape(b.variable.shape))
  if tf1_dir:
    tf1_writer.write_tf1(tf1_dir, model.generator, model.discriminator, vocab_path)
  model.optimizer.iterations.assign(start)
  step_fn = tf.function(lambda batch, step: model.compute_gradients(batch, step))
  out = {"before": names.extract(model.generator, model.discriminator), "steps": []}
  for batch in data:
    tensors = {k: tf.constant(v) for k, v in batch.items()}
    step = int(model.optimizer.iterations.numpy())
    outputs, losses, grads = step_fn(tensors, tf.constant(step, tf.int64))
    by_ref = {v.ref(): tf.convert_to_tensor(g).numpy()
              for v, g in zip(model.trained_variables(), grads)}
    record = {"step": step, "losses": {k: float(losses[k]) for k in LOSSES},
              "samples": outputs["samples"].numpy().astype(np.int32),
              "grads": {b.name: by_ref[b.variable.ref()].reshape(b.canonical_shape)
                        for b in bindings}}
    model.fit(tf.data.Dataset.from_tensors(tensors), steps_per_epoch=1, verbose=0)
    record["after"] = names.extract(model.generator, model.discriminator)
    out["steps"].append(record)
  return out


def relative(ours: dict, theirs: dict, floor_share: float = 1e-4) -> tuple[float, str]:
  """(largest max|o - t| / max(max|t|, floor), its tensor) over the tensors of `theirs`."""
  floor = floor_share * max(float(np.abs(t).max()) for t in theirs.values())
  worst, name = -1.0, ""
  for key, t in theirs.items():
    diff = float(np.abs(ours[key].astype(np.float64) - t).max())
    value = diff / max(float(np.abs(t).max()), floor)
    if value > worst:
      worst, name = value, key
  return worst, name


def _ulps(ours: np.ndarray, theirs: np.ndarray) -> float:
  """Largest difference in float32 spacings at theirs (at least 1e-4 of its largest)."""
  magnitude = np.maximum(np.abs(theirs), 1e-4 * np.abs(theirs).max()).astype(np.float32)
  return float((np.abs(ours.astype(np.float64) - theirs) / np.spacing(magnitude)).max())


def _worst_element(record: dict, grads: dict, after: dict, moved: list) -> dict:
  """Where the weights differ most (max |o - t| / max |t|), and how large and how exactly
  computed that element's gradient was: Adam without bias correction moves every element
  by about lr * 3.2 whatever its gradient's size, so a gradient that is a rounding error
  away from another direction moves its weight by a rounding-sized difference of a full
  update."""
  floor = 1e-4 * max(float(np.abs(t).max()) for t in after.values())

  def share(k):
    return float(np.abs(record["after"][k] - after[k]).max()) / max(
        float(np.abs(after[k]).max()), floor)

  name = max(moved, key=share)
  i = np.unravel_index(np.argmax(np.abs(record["after"][name] - after[name])), after[name].shape)
  g = float(grads[name][i])
  return {"tensor": name, "relative": share(name),
          "grad_share_of_max": abs(g) / float(np.abs(grads[name]).max()),
          "grad_relative_error": abs(float(record["grads"][name][i]) - g) / max(abs(g), 1e-30)}


def compare_case(preset: str, fraction: float, args, vocab, workdir: str) -> dict:
  """Ours against theirs, step for step; and (--control) ours against ours with the fused
  kernels off, the size of float32 differences a change of summation order makes."""
  import tf_keras

  tf_keras.backend.clear_session()
  config = our_config(preset, fraction, args)
  data = batches(config, vocab, workdir, args.steps)
  tf1_dir = tempfile.mkdtemp(dir=workdir)
  ours = our_steps(config, data, args.start_step, tf1_dir, vocab.path, args.lr_step_offset)
  theirs_config = their_config(shape_of(config), workdir, vocab.path)
  assert theirs_config.max_predictions_per_seq == config.max_predictions_per_seq
  result = {"preset": preset, "generator_fraction": fraction,
            "generator_hidden_size": config.generator.hidden_size,
            "generator_heads": config.generator.num_heads,
            "generator_as_ours_derives": config.generator == our_config(
                preset, fraction, args).replace(generator=None).generator,
            "their_adam_constants": {}}
  modes = ["theirs", "ours"] if args.their_adam_constants == "both" else [
      args.their_adam_constants]
  for mode, key in zip(modes, ("rows", "matched_rows")):
    step = AuthorsStep(theirs_config, os.path.join(tf1_dir, "model.ckpt"), args.start_step,
                       adam_constants=mode)
    theirs = []
    for batch, record in zip(data, ours["steps"]):
      losses, grads = step.run(batch, record["samples"])
      theirs.append({"losses": {k: float(v) for k, v in losses.items()}, "grads": grads,
                     "after": step.weights()})
    step.session.close()
    result["their_adam_constants"][mode] = step.adam_constants
    result[key] = _rows(ours, theirs, f"{preset} gen {fraction:g} vs theirs ({mode} Adam "
                        "constants)")
  if args.control:
    tf_keras.backend.clear_session()
    other = our_steps(config, data, args.start_step, None, vocab.path, args.lr_step_offset,
                      fused_kernels=False, initial=ours["before"])
    result["control"] = _rows(ours, other["steps"], f"{preset} gen {fraction:g} control")
  return result


def _rows(ours: dict, reference: list[dict], label: str) -> list[dict]:
  """Per step: losses, gradients and weights of `ours` against `reference` (the same keys)."""
  rows = []
  before = ours_before = ours["before"]
  for record, ref in zip(ours["steps"], reference):
    after, grads = ref["after"], ref["grads"]
    update = {k: after[k] - before[k] for k in after}
    ours_update = {k: record["after"][k] - ours_before[k] for k in after}
    # The key biases' gradients are 0 in exact arithmetic (softmax ignores a constant added
    # to a query's scores): Adam turns either side's rounding noise into updates of ~1e-12.
    moved = [k for k in after if not k.endswith("key/bias")]
    row = {"step": record["step"],
           "losses": {k: (record["losses"][k], ref["losses"][k]) for k in LOSSES},
           "loss_rel": {k: abs(record["losses"][k] - ref["losses"][k]) / abs(ref["losses"][k])
                        for k in LOSSES},
           "grad_rel": relative(record["grads"], grads),
           "weight_rel": relative(record["after"], after),
           "ulps": max(_ulps(record["after"][k], after[k]) for k in moved),
           # Their update over ours, fitted over every tensor: 1 when the learning rates agree.
           "update_ratio": sum(float(np.vdot(update[k], ours_update[k])) for k in moved)
           / sum(float(np.vdot(ours_update[k], ours_update[k])) for k in moved),
           "worst_element": _worst_element(record, grads, after, moved),
           "same_samples": bool(np.array_equal(record["samples"], ref.get("samples",
                                                                          record["samples"])))}
    before, ours_before = after, record["after"]
    rows.append(row)
    print(f"{label} step {row['step']}: losses ours/other "
          + ", ".join(f"{k} {a:.6f}/{b:.6f}" for k, (a, b) in row["losses"].items())
          + f"; grads {row['grad_rel'][0]:.1e} ({row['grad_rel'][1]}), weights "
          f"{row['weight_rel'][0]:.1e} ({row['weight_rel'][1]}), at most {row['ulps']:.0f} "
          f"ulps, update ratio {row['update_ratio']:.6f}; worst element "
          f"{row['worst_element']}", flush=True)
  return rows


def compare_masking(args, vocab, workdir: str) -> dict:
  import tensorflow as tf

  from electra_tf.data import pipeline

  config = our_config("small", 0.25, args).replace(batch_size=32)
  data = batches(config, vocab, workdir, args.mask_batches)
  mask = pipeline.mask_fn(vocab, config.max_predictions_per_seq, config.mask_prob)
  ours = [{**b, **{k: v.numpy() for k, v in mask(
      {k: tf.constant(b[k]) for k in ("input_ids", "input_mask", "segment_ids")},
      batch_seed=tf.constant([r, i], tf.int64)).items()}}
          for i, b in enumerate(data) for r in range(args.mask_repeats)]
  theirs = their_masks(their_config(shape_of(config), workdir, vocab.path), data,
                       args.mask_repeats)
  result = {"ours": mask_stats(ours, vocab), "theirs": mask_stats(theirs, vocab)}
  half = len(ours) // 2
  noise = mask_stats(ours[:half], vocab)["position_hist"], mask_stats(ours[half:], vocab)[
      "position_hist"]
  tv = lambda a, b: 0.5 * float(np.abs(np.subtract(a, b)).sum())  # noqa: E731
  result["position_tv"] = tv(result["ours"]["position_hist"], result["theirs"]["position_hist"])
  result["position_tv_between_halves_of_ours"] = tv(*noise)
  for side in ("ours", "theirs"):
    s = result[side]
    print(f"masking {side}: {s['sequences']} sequences, {s['predictions']:.3f} predictions "
          f"and {s['distinct']:.3f} distinct positions per sequence (duplicates "
          f"{s['duplicates']:.4f}), [MASK] share {s['mask_share']:.4f}, special or padding "
          f"chosen {s['special_or_pad_chosen']}", flush=True)
  print(f"position histogram total variation ours vs theirs {result['position_tv']:.4f} "
        f"(between two halves of ours {result['position_tv_between_halves_of_ours']:.4f})")
  return result


def markdown(results: dict) -> str:
  """The benchmarks page's tables of `results` (what main writes with --out)."""
  lines = ["| case | step | gen loss | disc loss | total loss | gradients (worst) | weights "
           "after the update (worst) | their update / ours | control: gradients, weights |",
           "|---|---|---|---|---|---|---|---|---|"]
  matched = any(case.get("matched_rows") for case in results["cases"])
  if matched:  # --their_adam_constants=both: their optimizer with our 1 - beta too
    lines[0] += " with our Adam constants: gradients, weights, their update / ours |"
    lines[1] += "---|"
  for case in results["cases"]:
    name = (f"{case['preset']}, generator {case['generator_fraction']:g} "
            f"({case['generator_hidden_size']} wide)")
    control = case.get("control") or [None] * len(case["rows"])
    both = case.get("matched_rows") or [None] * len(case["rows"])
    for i, (row, other, same) in enumerate(zip(case["rows"], control, both)):
      if 0 < i < len(case["rows"]) - 1:
        continue  # the first step and the last
      rel = row["loss_rel"]
      lines.append(
          f"| {name} | {i + 1} ({row['step']}) | {rel['gen_loss']:.1e} | {rel['disc_loss']:.1e} "
          f"| {rel['loss']:.1e} | {row['grad_rel'][0]:.1e} (`{row['grad_rel'][1]}`) "
          f"| {row['weight_rel'][0]:.1e} (`{row['weight_rel'][1]}`) "
          f"| {row['update_ratio']:.7f} | "
          + (f"{other['grad_rel'][0]:.1e}, {other['weight_rel'][0]:.1e}"
             + ("" if other["same_samples"] else " (other samples)") + " |" if other else "- |")
          + (f" {same['grad_rel'][0]:.1e}, {same['weight_rel'][0]:.1e}, "
             f"{same['update_ratio']:.7f} |" if same else " - |" if matched else ""))
  masking = results.get("masking")
  if masking:
    lines += ["", "| masking | sequences | predictions per sequence | distinct positions "
              "| duplicates | [MASK] share | [CLS]/[SEP]/padding chosen |",
              "|---|---|---|---|---|---|---|"]
    for side in ("ours", "theirs"):
      m = masking[side]
      lines.append(f"| {side} | {m['sequences']} | {m['predictions']:.3f} | {m['distinct']:.3f} "
                   f"| {m['duplicates']:.4f} | {m['mask_share']:.4f} "
                   f"| {m['special_or_pad_chosen']} |")
  return "\n".join(lines)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--electra_repo", required=True,
                      help="a checkout of github.com/google-research/electra")
  parser.add_argument("--cases", default="tiny:0.25,tiny:1,small:0.25,small:1",
                      help="preset:generator fraction pairs")
  parser.add_argument("--steps", type=int, default=6)
  parser.add_argument("--start_step", type=int, default=10,
                      help="the first step's number (the warmup ends there, so its learning "
                           "rate is not 0)")
  parser.add_argument("--batch_size", type=int, default=8)
  parser.add_argument("--control", type=int, default=1, choices=[0, 1],
                      help="1: also compare ours with ours with the fused kernels off")
  parser.add_argument("--lr_step_offset", type=int, default=1, choices=[0, 1],
                      help="1: our learning rate of step n+1 at update n, as their graph "
                           "applies it (global_step is incremented before the learning rate "
                           "is read); 0: the schedule's formula, as our step runs")
  parser.add_argument("--their_adam_constants", default="theirs",
                      choices=["theirs", "ours", "both"],
                      help="ours: their optimizer computes (1 - beta_1) and (1 - beta_2) as our "
                           "fused kernel does, in float32 (authors_lib.matched_betas); both: "
                           "each, against the same run of ours")
  parser.add_argument("--mask_batches", type=int, default=50)
  parser.add_argument("--mask_repeats", type=int, default=4)
  parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "authors_step"))
  parser.add_argument("--out", help="write the results as JSON here")
  args = parser.parse_args()
  install_shims(os.path.abspath(args.electra_repo))
  from electra_tf.data.vocab import builtin_vocab_path, load_vocab

  os.makedirs(args.workdir, exist_ok=True)
  vocab = load_vocab(builtin_vocab_path())
  results = {"authors_commit": authors_commit(args.electra_repo), "ours": _our_commit(),
             "cpu": _cpu(), "cases": [], "masking": None}
  for case in args.cases.split(","):
    preset, fraction = case.split(":")
    results["cases"].append(compare_case(preset, float(fraction), args, vocab, args.workdir))
  if args.mask_batches:
    results["masking"] = compare_masking(args, vocab, args.workdir)
  print(markdown(results))
  print(json.dumps({k: results[k] for k in ("authors_commit", "ours", "cpu")}))
  if args.out:
    with open(args.out, "w") as f:
      json.dump(results, f, indent=1)


def _our_commit() -> str:
  run = lambda *a: subprocess.run(["git", *a], cwd=ROOT, capture_output=True,  # noqa: E731
                                  text=True).stdout.strip()
  changed = run("status", "--porcelain", "--untracked-files=no", "--", "electra_tf")
  return (run("rev-parse", "--short", "HEAD") or "unknown") + ("+changes" if changed else "")


def _cpu() -> str:
  try:
    for line in open("/proc/cpuinfo"):
      if line.startswith("model name"):
        return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or "unknown CPU"


if __name__ == "__main__":
  main()
