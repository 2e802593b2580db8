"""Int8 (dynamic-range) vs float TFLite accuracy on the movie-review dev set.

Fine-tunes a classifier on the movie reviews from real pretrained weights (all-MiniLM-L6-v2,
BERT-shaped, requirements-data.txt), exports it with electra-export --format=tflite, and
scores the Keras model, the float and the int8 TFLite models on the 1,060 dev sentences
with LiteRT's interpreter, one sentence at a time as a phone runs it.

  python bench/serving/exports_int8.py [--train_examples=3000] [--epochs=1] [--max_seq_length=64]

Prints accuracies, the int8 - float difference, file sizes and single-sentence latency.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
import tensorflow as tf
from serving_lib import fine_tuned_classifier, save_classifier

from electra_tf.serving import sources, tflite_export


def _tflite_predictions(path: str, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, float]:
  from ai_edge_litert.interpreter import Interpreter

  runner = Interpreter(model_path=path).get_signature_runner("serving_default")
  predictions, start = [], time.perf_counter()
  for i in range(len(inputs["input_ids"])):
    out = runner(**{k: v[i:i + 1] for k, v in inputs.items()})
    predictions.append(int(out["logits"][0].argmax()))
  return np.array(predictions), (time.perf_counter() - start) / len(predictions) * 1e3


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--train_examples", type=int, default=3000)
  parser.add_argument("--epochs", type=int, default=1)
  parser.add_argument("--max_seq_length", type=int, default=64)
  args = parser.parse_args()

  model, config, vocab_path, _, inputs, labels = fine_tuned_classifier(
      args.max_seq_length, args.train_examples, args.epochs)
  keras_pred = model.predict({k: tf.constant(v) for k, v in inputs.items()},
                             batch_size=64, verbose=0)["logits"].argmax(-1)
  with tempfile.TemporaryDirectory() as tmp:
    save_classifier(model, config, vocab_path, os.path.join(tmp, "run"))
    out = os.path.join(tmp, "tflite")
    tflite_export.export(sources.load_task(os.path.join(tmp, "run"), "tflite"), out)
    rows = [("keras (float32)", keras_pred, None, None)]
    for name, file in (("tflite float32", tflite_export.FLOAT_NAME),
                       ("tflite int8", tflite_export.INT8_NAME)):
      pred, ms = _tflite_predictions(os.path.join(out, file), inputs)
      rows.append((name, pred, os.path.getsize(os.path.join(out, file)) / 2**20, ms))
  print(f"\nmovie-review dev set, {len(labels)} sentences, max_seq_length {args.max_seq_length}")
  print("| model | accuracy | size (MiB) | ms / sentence |\n|---|---|---|---|")
  accuracy = {}
  for name, pred, size, ms in rows:
    accuracy[name] = float((pred == labels).mean())
    print(f"| {name} | {100 * accuracy[name]:.2f} | {size or 0:.1f} | {ms or 0:.1f} |")
  agree = float((rows[1][1] == rows[2][1]).mean())
  delta = 100 * (accuracy["tflite int8"] - accuracy["tflite float32"])
  print(f"int8 - float accuracy: {delta:+.2f} points; predictions agree on "
        f"{100 * agree:.1f}% of sentences")


if __name__ == "__main__":
  main()
