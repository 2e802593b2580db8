"""Every layer and model of electra_tf.model through the contract harness (harness.py):
output shapes, get_config/from_config, checkpoint save and load, mixed precision."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from harness import Case, run_layer_test

from electra_tf import features as F
from electra_tf.config import EncoderConfig, PretrainConfig
from electra_tf.model import pretrain_metrics
from electra_tf.model.dropout import SeededDropout
from electra_tf.model.elementwise import LayerNorm, exact_gelu
from electra_tf.model.encoder import ElectraEncoder
from electra_tf.model.finetune_models import ElectraClassifier, ElectraSpanQA
from electra_tf.model.heads import DiscriminatorHead, GeneratorHead
from electra_tf.model.layers import ElectraEmbeddings, ElectraTransformerBlock, GDESEmbeddings
from electra_tf.model.networks import AllTokensPredictor, Discriminator, Generator
from electra_tf.model.pretrain_metrics import PretrainMetrics
from electra_tf.model.pretrainer import ElectraPretrainer
from electra_tf.model.tagger import ElectraTagger
from electra_tf.model.task_heads import ClassificationHead, SpanHead, TokenClassificationHead

B, L, P, V, H, E = 2, 6, 2, 20, 8, 4
BF16, F32, I32 = tf.bfloat16, tf.float32, tf.int32

# Non-default values throughout, so a constructor argument that get_config drops shows.
CONFIG = EncoderConfig(vocab_size=V, hidden_size=H, num_layers=2, num_heads=2,
                       intermediate_size=16, embedding_size=E, max_position_embeddings=16,
                       type_vocab_size=3, dropout_rate=0.2, attention_dropout_rate=0.15,
                       initializer_range=0.05, layer_norm_eps=1e-6)
EMBEDDING_KWARGS = dict(vocab_size=V, embedding_size=E, max_position_embeddings=16,
                        type_vocab_size=3, dropout_rate=0.2, initializer_range=0.05,
                        layer_norm_eps=1e-6, name="embeddings")


def _ids():
  return tf.constant(np.random.default_rng(0).integers(1, V, size=(B, L)), tf.int32)


def _encoder_inputs():
  mask = tf.constant([[1] * L, [1] * (L - 2) + [0, 0]], tf.int32)
  segments = tf.constant([[0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 2, 2]], tf.int32)
  return {F.INPUT_IDS: _ids(), F.INPUT_MASK: mask, F.SEGMENT_IDS: segments}


def _hidden(*shape):
  return tf.random.stateless_normal(shape, seed=[1, 2])


def _embeddings_kwargs():
  return {"shared": ElectraEmbeddings(**EMBEDDING_KWARGS)}


def _generator_head_kwargs():
  return {"embeddings": ElectraEmbeddings(**EMBEDDING_KWARGS), "initializer_range": 0.05,
          "layer_norm_eps": 1e-6, "name": "generator_predictions"}


def _pretrain_features():
  ids = _ids().numpy()
  masked = ids.copy()
  masked[:, [1, 3]] = 3
  return {F.INPUT_IDS: ids, F.MASKED_INPUT_IDS: masked,
          F.INPUT_MASK: np.ones((B, L), np.int32), F.SEGMENT_IDS: np.zeros((B, L), np.int32),
          F.MASKED_LM_POSITIONS: np.array([[1, 3]] * B, np.int32),
          F.MASKED_LM_IDS: ids[:, [1, 3]], F.MASKED_LM_WEIGHTS: np.ones((B, P), np.float32)}


def _pretrain_config(**changes):
  return PretrainConfig(model=CONFIG, generator_fraction=0.5, max_seq_length=L,
                        max_predictions_per_seq=P, batch_size=B, num_train_steps=4,
                        warmup_steps=1, seed=7, **changes).to_dict()


SPAN_OUTPUTS = {"start_logits": (B, L), "end_logits": (B, 3, L), "start_top_index": (B, 3),
                "impossible_logit": (B,)}
SPAN_DTYPES = {"start_logits": F32, "end_logits": F32, "start_top_index": I32,
               "impossible_logit": F32}
RTD_OUTPUTS = {"gen_logits": (B, P, V), "samples": (B, P), "corrupted_ids": (B, L),
               "labels": (B, L), "disc_weights": (B, L), "disc_logits": (B, L)}
RTD_DTYPES = {"gen_logits": F32, "samples": I32, "corrupted_ids": I32, "labels": I32,
              "disc_weights": F32, "disc_logits": F32}

CASES = {
    "ElectraEmbeddings": Case(
        ElectraEmbeddings, EMBEDDING_KWARGS,
        lambda: (_ids(), _encoder_inputs()[F.SEGMENT_IDS]), (B, L, E), BF16),
    "GDESEmbeddings": Case(
        GDESEmbeddings, _embeddings_kwargs,
        lambda: (_ids(), _encoder_inputs()[F.SEGMENT_IDS]), (B, L, E), BF16),
    "LayerNorm": Case(LayerNorm, dict(epsilon=1e-6, name="layer_norm"),
                      lambda: (_hidden(B, L, H),), (B, L, H), BF16,
                      call=lambda layer, args: layer(*args)),
    "ElectraTransformerBlock": Case(
        ElectraTransformerBlock,
        dict(num_attention_heads=2, inner_dim=16, inner_activation=exact_gelu,
             output_dropout=0.2, attention_dropout=0.15, norm_first=False, norm_epsilon=1e-6,
             kernel_initializer=tf_keras.initializers.TruncatedNormal(stddev=0.05),
             name="layer_0"),
        lambda: ([_hidden(B, L, H), tf.ones([B, 1, L])],), (B, L, H), F32),
    # Each block ends in a float32 LayerNorm (as Model Garden's), so under mixed precision
    # the blocks' outputs are float32 and only the (projected) embeddings are bfloat16.
    "ElectraEncoder": Case(ElectraEncoder, dict(config=CONFIG, name="encoder"),
                           lambda: (_encoder_inputs(),), (B, L, H), F32),
    "ElectraEncoder/hidden_states": Case(
        ElectraEncoder, dict(config=CONFIG, name="encoder"), lambda: (_encoder_inputs(),),
        ((B, L, H), [(B, L, H)] * 3), (F32, [BF16, F32, F32]),
        call_kwargs={"output_hidden_states": True}),
    "GeneratorHead": Case(GeneratorHead, _generator_head_kwargs,
                          lambda: (_hidden(B, P, H),), (B, P, V), F32,
                          call=lambda layer, args: layer(*args)),
    "DiscriminatorHead": Case(
        DiscriminatorHead, dict(hidden_size=H, initializer_range=0.05, name="head"),
        lambda: (_hidden(B, L, H),), (B, L), F32, call=lambda layer, args: layer(*args)),
    "SeededDropout": Case(SeededDropout, dict(rate=0.3, name="dropout"),
                          lambda: (_hidden(B, L, H),), (B, L, H), BF16),
    "ClassificationHead": Case(
        ClassificationHead, dict(num_labels=3, dropout_rate=0.2, initializer_range=0.05,
                                 initializer="normal", name="classifier_head"),
        lambda: (_hidden(B, L, H),), (B, 3), F32),
    "TokenClassificationHead": Case(
        TokenClassificationHead, dict(num_labels=5, dropout_rate=0.2, initializer_range=0.05,
                                      initializer="normal", name="tagger_head"),
        lambda: (_hidden(B, L, H),), (B, L, 5), F32),
    "SpanHead": Case(
        SpanHead, dict(initializer_range=0.05, initializer="normal", name="qa_head"),
        lambda: (_hidden(B, L, H), _encoder_inputs()[F.INPUT_MASK]),
        {"start_logits": (B, L), "end_logits": (B, L)},
        {"start_logits": F32, "end_logits": F32}),
    "SpanHead/joint_answerable": Case(
        SpanHead, dict(joint_end=True, answerable=True, beam_size=3, mlp_width=12,
                       initializer_range=0.05, initializer="normal", name="qa_head"),
        lambda: (_hidden(B, L, H), _encoder_inputs()[F.INPUT_MASK]), SPAN_OUTPUTS,
        SPAN_DTYPES),
    "Generator": Case(
        Generator, dict(config=CONFIG, name="gen"),
        lambda: ({**_encoder_inputs(), F.MASKED_LM_POSITIONS: tf.constant([[1, 3]] * B)},),
        (B, P, V), F32),
    "Generator/all_positions": Case(Generator, dict(config=CONFIG, name="gen"),
                                    lambda: (_encoder_inputs(),), (B, L, V), F32),
    "Discriminator": Case(Discriminator, dict(config=CONFIG, name="disc"),
                          lambda: (_encoder_inputs(),), (B, L), F32),
    "AllTokensPredictor": Case(AllTokensPredictor, dict(config=CONFIG, name="atp"),
                               lambda: (_encoder_inputs(),), ((B, L, V), (B, L)), (F32, F32)),
    "ElectraClassifier": Case(
        ElectraClassifier, dict(encoder_config=CONFIG, num_labels=3, dropout_rate=0.25,
                                clip_norm=0.5, head_initializer="normal", name="classifier"),
        lambda: (_encoder_inputs(),), {"logits": (B, 3), "probabilities": (B, 3)},
        {"logits": F32, "probabilities": F32}),
    "ElectraClassifier/regression": Case(
        ElectraClassifier, dict(encoder_config=CONFIG, num_labels=1, dropout_rate=0.25,
                                clip_norm=0.5, head_initializer="normal", name="regressor"),
        lambda: (_encoder_inputs(),), {"logits": (B, 1), "predictions": (B,)},
        {"logits": F32, "predictions": F32}),
    "ElectraTagger": Case(
        ElectraTagger, dict(encoder_config=CONFIG, num_labels=5, dropout_rate=0.25,
                            clip_norm=0.5, head_initializer="normal", name="tagger"),
        lambda: (_encoder_inputs(),), {"logits": (B, L, 5)}, {"logits": F32}),
    "ElectraSpanQA": Case(
        ElectraSpanQA, dict(encoder_config=CONFIG, joint_end=True, answerable=True,
                            answerable_weight=0.3, beam_size=3, clip_norm=0.5,
                            head_initializer="normal", name="span_qa"),
        lambda: (_encoder_inputs(),), SPAN_OUTPUTS, SPAN_DTYPES),
    "ElectraPretrainer": Case(
        ElectraPretrainer, dict(config=_pretrain_config(), fused_kernels=False, name="pt"),
        lambda: (_pretrain_features(),), RTD_OUTPUTS, RTD_DTYPES),
    "ElectraPretrainer/gdes": Case(
        ElectraPretrainer, dict(config=_pretrain_config(embedding_sharing="gdes"),
                                fused_kernels=False, name="pt"),
        lambda: (_pretrain_features(),), RTD_OUTPUTS, RTD_DTYPES),
    "ElectraPretrainer/all_tokens_mlm": Case(
        ElectraPretrainer, dict(config=_pretrain_config(objective="all_tokens_mlm"),
                                fused_kernels=False, name="pt"),
        lambda: (_pretrain_features(),),
        {"gen_logits": (B, P, V), "samples": (B, P), "corrupted_ids": (B, L),
         "mlm_loss_terms": ((), ()), "mlm_predictions": (B, L), "mlm_targets": (B, L),
         "mlm_weights": (B, L)},
        {"gen_logits": F32, "samples": I32, "corrupted_ids": I32, "mlm_loss_terms": (F32, F32),
         "mlm_predictions": I32, "mlm_targets": I32, "mlm_weights": F32}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_layer_contract(name, tmp_path):
  run_layer_test(CASES[name], tmp_path)


@pytest.mark.parametrize("objective", ["mlm", "electra", "replace_mlm"])
def test_pretrain_metrics_config_and_checkpoint(objective, tmp_path):
  metrics = PretrainMetrics(objective, name="metrics")
  clone = PretrainMetrics.from_config(metrics.get_config())
  assert clone.get_config() == metrics.get_config()
  assert [m.name for m in clone.metrics] == [m.name for m in metrics.metrics]
  metrics.loss.update_state(3.0)
  metrics.gen_accuracy.update_state([1.0, 0.0, 1.0])
  path = tf.train.Checkpoint(metrics=metrics).write(str(tmp_path / "ckpt"))
  tf.train.Checkpoint(metrics=clone).read(path).assert_consumed()
  assert clone.loss.result().numpy() == 3.0
  np.testing.assert_allclose(clone.gen_accuracy.result().numpy(), 2 / 3)


def test_layer_norm_variables_are_named_so_weight_decay_skips_them():
  # AdamW excludes weights by name (optimizer.NO_DECAY_PATTERNS): a LayerNorm built outside
  # its own name scope (say, inside its parent's build) would be called ".../gamma" and decay.
  from electra_tf.training.optimizer import NO_DECAY_PATTERNS

  model = Generator(CONFIG, name="gen")
  model(_encoder_inputs())
  norms = [v.name for layer in model.submodules
           if isinstance(layer, tf_keras.layers.LayerNormalization) for v in layer.weights]
  assert len(norms) == 2 * (1 + 2 * CONFIG.num_layers + 1), norms
  assert all(any(p in name for p in NO_DECAY_PATTERNS) for name in norms), norms


def test_harness_catches_a_dropped_constructor_argument(tmp_path):
  class Forgetful(ClassificationHead):
    def get_config(self):
      config = super().get_config()
      del config["initializer"]
      return config

  case = Case(Forgetful, dict(num_labels=3, initializer="normal"),
              lambda: (_hidden(B, L, H),), (B, 3), F32)
  with pytest.raises(AssertionError, match="drops 'initializer'"):
    run_layer_test(case, tmp_path)


def test_generator_hits_are_the_argmax():
  logits = tf.random.stateless_normal([3, 4, 50], seed=[1, 2])
  targets = tf.constant([[int(tf.argmax(logits[i, j])) if (i + j) % 2 else (i * 7 + j) % 50
                          for j in range(4)] for i in range(3)], tf.int32)
  want = tf.cast(tf.argmax(logits, -1, output_type=tf.int32) == targets, tf.float32)
  np.testing.assert_array_equal(pretrain_metrics._hits(logits, targets).numpy(), want.numpy())
  assert 0 < want.numpy().mean() < 1
