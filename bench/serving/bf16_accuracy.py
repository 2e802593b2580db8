"""What `electra-export --serving_dtype=bfloat16` costs in accuracy: a movie-review classifier
served in float32 and in bfloat16, raw text in, on the whole dev set.

Fine-tunes a classifier on the movie reviews from real pretrained weights (all-MiniLM-L6-v2,
BERT-shaped, requirements-data.txt), exports it twice as a TF Serving SavedModel (float32,
and bfloat16 kernel copies), and classifies the 1,057 dev sentences through each export's
`classify_text` signature, 32 at a time.

  python bench/serving/bf16_accuracy.py [--train_examples=3000] [--epochs=1] [--seed=0]

Prints both accuracies, how often the two agree, the largest probability difference, the
Keras model's accuracy beside them, the CPU and its bfloat16 flags.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  registers the ops of the text signatures
from serving_lib import cpu_description, fine_tuned_classifier, save_classifier

from electra_tf.serving import saved_model
from electra_tf.serving.signatures import ServingOptions

MAX_SEQ_LENGTH = 128


def _served(path: str, texts: list[str]) -> tuple[np.ndarray, float]:
  """Probabilities [N, 2] from the export's classify_text, and ms per sentence."""
  fn = tf.saved_model.load(path).signatures["classify_text"]
  fn(text=tf.constant(texts[:32]))  # first call: graph set-up
  out, start = [], time.perf_counter()
  for i in range(0, len(texts), 32):
    out.append(fn(text=tf.constant(texts[i:i + 32]))["probabilities"].numpy())
  return np.concatenate(out), (time.perf_counter() - start) / len(texts) * 1e3


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--train_examples", type=int, default=3000)
  parser.add_argument("--epochs", type=int, default=1)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()

  model, config, vocab_path, dev, inputs, labels = fine_tuned_classifier(
      MAX_SEQ_LENGTH, args.train_examples, args.epochs, args.seed)
  keras_probs = model.predict({k: tf.constant(v) for k, v in inputs.items()},
                              batch_size=64, verbose=0)["probabilities"]
  texts = [e.texts[0] for e in dev]
  with tempfile.TemporaryDirectory() as tmp:
    run = save_classifier(model, config, vocab_path, os.path.join(tmp, "run"))
    served = {}
    for dtype in ("float32", "bfloat16"):
      path = saved_model.export(run, None, os.path.join(tmp, dtype), ServingOptions(dtype=dtype))
      served[dtype] = _served(path, texts)
  commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], text=True,
                          capture_output=True, cwd=os.path.dirname(__file__)).stdout.strip()
  print(f"\nmovie-review dev set, {len(labels)} sentences (classify_text, batches of 32); "
        f"CPU {cpu_description()}; commit {commit}")
  print("| model | accuracy | agrees with float32 | max abs prob diff vs float32 | "
        "ms / sentence |\n|---|---|---|---|---|")
  f32 = served["float32"][0]
  rows = [("Keras (float32, finetune.py's inputs)", keras_probs, None)] + [
      (f"SavedModel {dtype}", probs, ms) for dtype, (probs, ms) in served.items()]
  for name, probs, ms in rows:
    agree = (probs.argmax(-1) == f32.argmax(-1)).mean()
    print(f"| {name} | {100 * (probs.argmax(-1) == labels).mean():.2f} | {100 * agree:.1f}% | "
          f"{np.abs(probs - f32).max():.1e} | {f'{ms:.1f}' if ms else ''} |")


if __name__ == "__main__":
  main()
