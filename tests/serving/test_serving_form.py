"""The signatures' serving form, in process: the transformer blocks written out as 2-D
products equal the Keras call; raw text padded to the batch's longest sequence or to its
length bucket, and the XLA-compiled model, give the same numbers; bfloat16 kernel copies
stay near float32."""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.config import EncoderConfig, FinetuneConfig
from electra_tf.data.tokenizer import WordPieceTokenizer
from electra_tf.data.vocab import builtin_vocab_path, load_vocab
from electra_tf.errors import UserError
from electra_tf.model import fused
from electra_tf.model.finetune_models import build_finetune_model, model_for_task
from electra_tf.serving import text as serving_text
from electra_tf.serving.signatures import ClassifierServing, ServingOptions
from electra_tf.tasks import classification_data

ENC = EncoderConfig(hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64,
                    embedding_size=16, max_position_embeddings=64)
SPEC = classification_data.TaskSpec("classification", ("text",), "label", ("no", "yes"),
                                    ("accuracy",), "accuracy")
TEXTS = ["Good.", "A warm, funny and moving film about two friends.", "",
         "Dull and far too long."]


@pytest.fixture(scope="module")
def classifier():
  tf.keras.utils.set_random_seed(3)
  model = build_finetune_model(model_for_task(
      FinetuneConfig(task="classification", max_seq_length=24), ENC, 2))
  model({k: tf.ones([1, 4], tf.int32) for k in ("input_ids", "input_mask", "segment_ids")})
  return model


def test_padded_length():
  def length(longest, buckets):
    return int(serving_text.padded_length(tf.constant(longest), 24, buckets))

  assert [length(n, ()) for n in (2, 9, 24)] == [2, 9, 24]
  assert [length(n, (8, 16)) for n in (2, 8, 9, 16, 17, 24)] == [8, 8, 16, 16, 24, 24]
  assert length(30, (8, 64)) == 24  # buckets past max_seq_length are not used
  with pytest.raises(UserError, match="2 or more"):
    ServingOptions(length_buckets=(1, 8))
  with pytest.raises(UserError, match="serving dtype"):
    ServingOptions(dtype="float16")


def test_serving_form_equals_keras_blocks(classifier):
  rng = np.random.default_rng(0)
  ids = rng.integers(1000, 30000, size=(3, 11)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, 6:] = 0
  mask[2, 2:] = 0
  inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": (ids % 2).astype(np.int32)}
  want = classifier.encoder(inputs, training=False).numpy()

  @tf.function
  def serving(x):
    with fused.serving_graph():
      return classifier.encoder(x, training=False)

  graph = serving.get_concrete_function(inputs).graph
  ops = [op.type for op in graph.get_operations()]
  # The blocks' projections are 2-D products; the one Einsum left is the token-type lookup.
  assert ops.count("Einsum") == 1 and ops.count("MatMul") >= 6 * ENC.num_layers
  got = serving(inputs).numpy()
  np.testing.assert_allclose(got[mask == 1], want[mask == 1], atol=2e-5)


def _texts_through(module, texts):
  vocab = module.tokenizer.vocab
  inputs = serving_text.pack_sentences(module.tokenizer, [tf.constant(texts)],
                                       module.max_seq_length, vocab.cls_id, vocab.sep_id,
                                       module.buckets)
  return inputs, module._outputs(inputs)["probabilities"].numpy()


def test_padding_and_bfloat16_paths(classifier):
  vocab = load_vocab(builtin_vocab_path())
  enc = classification_data.encode([classification_data.Example((t, ), 0) for t in TEXTS],
                                   WordPieceTokenizer(builtin_vocab_path()), 24, SPEC)
  want = classifier({k: tf.constant(enc[k]) for k in ("input_ids", "input_mask",
                                                      "segment_ids")},
                    training=False)["probabilities"].numpy()
  longest = int(enc["input_mask"].sum(1).max())
  assert longest < 16
  widths = {}
  for name, options in (("longest", ServingOptions()),
                        ("buckets", ServingOptions(length_buckets=(8, 16))),
                        ("xla", ServingOptions(length_buckets=(8, 16), jit_compile=True))):
    module = ClassifierServing(classifier, vocab, 24, SPEC.label_names, options)
    inputs, probs = _texts_through(module, TEXTS)
    widths[name] = inputs["input_ids"].shape[1]
    np.testing.assert_array_equal(inputs["input_ids"].numpy()[:, :longest],
                                  enc["input_ids"][:, :longest])
    np.testing.assert_allclose(probs, want, atol=1e-5)
  assert widths == {"longest": longest, "buckets": 16, "xla": 16}
  # One short sentence alone: the smallest bucket; a bucket past max_seq_length is it.
  module = ClassifierServing(classifier, vocab, 24, SPEC.label_names,
                             ServingOptions(length_buckets=(8, 16)))
  assert _texts_through(module, ["Good."])[0]["input_ids"].shape[1] == 8
  module = ClassifierServing(classifier, vocab, 24, SPEC.label_names,
                             ServingOptions(length_buckets=(128,)))
  assert _texts_through(module, ["Good."])[0]["input_ids"].shape[1] == 24

  bf16 = ClassifierServing(classifier, vocab, 24, SPEC.label_names,
                           ServingOptions(dtype="bfloat16"))
  assert len(bf16.kernel_copies) == 6 * ENC.num_layers
  assert all(v.dtype == tf.bfloat16 for v in bf16.kernel_copies)
  _, probs = _texts_through(bf16, TEXTS)
  diff = np.abs(probs - want).max()
  assert 0 < diff < 2e-2, diff
