"""TF Hub export: the preprocessor + encoder pair loaded with tensorflow_hub's own KerasLayer
gives our token ids and hidden states, and fine-tunes on real movie-review sentences."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from electra_tf.checkpoints.native import save_discriminator
from electra_tf.config import EncoderConfig
from electra_tf.data.tokenizer import WordPieceTokenizer
from electra_tf.data.vocab import builtin_vocab_path
from electra_tf.model.networks import Discriminator, dummy_inputs
from electra_tf.serving import sources, text, tfhub
from electra_tf.tasks.classification_data import movie_reviews

hub = pytest.importorskip("tensorflow_hub")

ENC = EncoderConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
                    embedding_size=16, max_position_embeddings=128)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  """A tiny discriminator saved as a checkpoint, exported through load_encoder."""
  root = tmp_path_factory.mktemp("tfhub")
  tf_keras.utils.set_random_seed(0)
  disc = Discriminator(ENC)
  disc(dummy_inputs())
  save_discriminator(disc, builtin_vocab_path(), str(root / "disc"))
  tfhub.export(sources.load_encoder(str(root / "disc")), str(root / "hub"))
  return disc, root / "hub"


def _sentences(n):
  _, train, _ = movie_reviews(seed=0)
  return train[:n]


def test_hub_keras_layer_matches_ours(exported):
  disc, path = exported
  preprocess = hub.KerasLayer(str(path / "preprocessor"))
  encoder = hub.KerasLayer(str(path / "encoder"), trainable=True)
  texts = [e.texts[0] for e in _sentences(48)] + ["", "Zürich café 东京 🙂"]
  inputs = preprocess(tf.constant(texts))
  ours = text.pack_sentences(WordPieceTokenizer(builtin_vocab_path()), [tf.constant(texts)],
                             tfhub.DEFAULT_SEQ_LENGTH, 101, 102,
                             buckets=(tfhub.DEFAULT_SEQ_LENGTH,))  # TF Hub's fixed length
  for hub_key, our_key in tfhub.HUB_INPUTS.items():
    np.testing.assert_array_equal(inputs[hub_key].numpy(), ours[our_key].numpy())

  out = encoder(inputs)
  sequence, hidden = disc.encoder(ours, training=False, output_hidden_states=True)
  assert np.abs(out["sequence_output"].numpy() - sequence.numpy()).max() < 1e-5
  assert np.abs(out["pooled_output"].numpy() - sequence.numpy()[:, 0]).max() < 1e-5
  assert len(out["encoder_outputs"]) == ENC.num_layers
  for got, want in zip(out["encoder_outputs"], hidden[1:]):
    assert np.abs(got.numpy() - want.numpy()).max() < 1e-5
  assert len(encoder.trainable_weights) == len(disc.encoder.trainable_weights)

  # Text pairs through the preprocessor's tokenize and bert_pack_inputs subobjects.
  loaded = tf.saved_model.load(str(path / "preprocessor"))
  pack = hub.KerasLayer(loaded.bert_pack_inputs, arguments={"seq_length": 24})
  pair = pack([loaded.tokenize(tf.constant(["A fine film."])),
               loaded.tokenize(tf.constant(["Was it good?"]))])
  assert pair["input_word_ids"].shape == (1, 24)
  assert pair["input_type_ids"].numpy().max() == 1


def test_fine_tuning_through_hub_keras_layer_moves_the_loss(exported):
  _, path = exported
  examples = _sentences(32)
  texts = tf.constant([e.texts[0] for e in examples])
  labels = tf.constant([e.label for e in examples])
  tf_keras.utils.set_random_seed(1)
  sentences = tf_keras.Input(shape=(), dtype=tf.string)
  preprocess = hub.KerasLayer(str(path / "preprocessor"))
  encoder = hub.KerasLayer(str(path / "encoder"), trainable=True)
  pooled = encoder(preprocess(sentences))["pooled_output"]
  model = tf_keras.Model(sentences, tf_keras.layers.Dense(2)(pooled))
  model.compile(tf_keras.optimizers.Adam(3e-3),
                tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  before_weights = [w.numpy() for w in encoder.trainable_weights]
  before = model.evaluate(texts, labels, verbose=0)
  model.fit(texts, labels, batch_size=16, epochs=6, verbose=0)
  after = model.evaluate(texts, labels, verbose=0)
  moved = [np.abs(a - w.numpy()).max() for a, w in zip(before_weights, encoder.trainable_weights)]
  assert min(moved) > 0, "every encoder weight is trained through the hub layer"
  assert after < before - 0.02, (before, after)
