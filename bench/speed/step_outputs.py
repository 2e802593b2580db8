r"""Whether two versions of the pretraining step compute the same thing, within the dtype's
tolerance: the losses, the gradients and the weights after one AdamW update.

  # in each code tree (the first run writes the shared initial weights, the second reads them)
  python bench/speed/step_outputs.py save --weights=/tmp/w.npz --out=/tmp/old.npz \
      --precision=bfloat16
  python bench/speed/step_outputs.py save --weights=/tmp/w.npz --out=/tmp/new.npz \
      --precision=bfloat16
  python bench/speed/step_outputs.py compare /tmp/new.npz /tmp/old.npz --weights=/tmp/w.npz

The small preset at batch 8 on bench/speed/pretrain_step.py's synthetic batch, the dropout masks
and generator samples of step 3, and the update at step 1,000 (past the warmup, so the
learning rate is not 0). `compare` prints each kind's largest difference relative to the
tensor's largest element (a tensor smaller than 1e-4 of the largest of its kind, such as a
key bias's gradient, which is 0 in exact arithmetic, is measured against that floor), and
for the weights the largest absolute difference beside the update's largest change.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.dirname(os.path.abspath(__file__))]


def save(args) -> None:
  import tensorflow as tf
  from step_lib import synthetic_batch

  from electra_tf import presets
  from electra_tf.training import pretraining, strategy

  config = presets.get("small").replace(
      batch_size=8, steps_per_execution=1,
      precision="mixed_bfloat16" if args.precision == "bfloat16" else "float32")
  strategy.set_precision(config.precision)
  batch = {k: tf.constant(v) for k, v in synthetic_batch(config).items()}
  model = pretraining.build_model(config, tf.distribute.get_strategy(), jit_compile=False)
  model(batch)
  variables = {v.name: v for v in model.trainable_variables}
  if os.path.exists(args.weights):
    saved = np.load(args.weights)
    for name, variable in variables.items():
      variable.assign(saved[name])
  else:
    np.savez(args.weights, **{n: v.numpy() for n, v in variables.items()})
  _, losses, grads = tf.function(
      lambda: model.compute_gradients(batch, tf.constant(3, tf.int64)))()
  out = {f"loss/{k}": v.numpy() for k, v in losses.items()}
  out.update({f"grad/{v.name}": tf.convert_to_tensor(g).numpy()
              for v, g in zip(model.trained_variables(), grads)})
  model.optimizer.iterations.assign(1000)
  model.fit(tf.data.Dataset.from_tensors(batch).repeat(), steps_per_epoch=1, verbose=0)
  out.update({f"after/{n}": v.numpy() for n, v in variables.items()})
  np.savez(args.out, **out)


def compare(args) -> None:
  a, b = np.load(args.new), np.load(args.old)
  start = np.load(args.weights)
  for key in a.files:
    if key.startswith("loss/"):
      print(f"{key}: {float(a[key]):.7g} vs {float(b[key]):.7g}")
  for kind in ("grad/", "after/"):
    keys = [k for k in a.files if k.startswith(kind)]
    floor = 1e-4 * max(np.abs(b[k]).max() for k in keys)
    rel = {k: np.abs(a[k].astype(np.float64) - b[k]).max() / max(np.abs(b[k]).max(), floor)
           for k in keys}
    worst = max(rel, key=rel.get)
    print(f"{kind[:-1]}: largest relative difference {rel[worst]:.2e} ({worst})")
  after = [k for k in a.files if k.startswith("after/")]
  diff = max(np.abs(a[k].astype(np.float64) - b[k]).max() for k in after)
  step = max(np.abs(b[k].astype(np.float64) - start[k[len("after/"):]]).max() for k in after)
  print(f"weights after one update: largest absolute difference {diff:.2e}, "
        f"largest change by the update {step:.2e}")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  sub = parser.add_subparsers(dest="command", required=True)
  s = sub.add_parser("save")
  s.add_argument("--weights", required=True, help="shared initial weights (.npz)")
  s.add_argument("--out", required=True)
  s.add_argument("--precision", choices=["float32", "bfloat16"], default="float32")
  c = sub.add_parser("compare")
  c.add_argument("new")
  c.add_argument("old")
  c.add_argument("--weights", required=True)
  args = parser.parse_args()
  save(args) if args.command == "save" else compare(args)


if __name__ == "__main__":
  main()
