"""Tiny fine-tuned runs and a pretrained discriminator for the export tests, and real text
encoded for them (movie reviews; SQuAD questions with their paragraphs)."""

import dataclasses

import numpy as np
import tf_keras

from electra_tf.config import EncoderConfig, FinetuneConfig
from electra_tf.data import builtin
from electra_tf.data.tokenizer import WordPieceTokenizer
from electra_tf.data.vocab import builtin_vocab_path
from electra_tf.model.finetune_models import build_finetune_model, model_for_task
from electra_tf.tasks import classification_data, squad_data
from electra_tf.training.finetuned import save_finetuned

TINY = EncoderConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
                     embedding_size=16, max_position_embeddings=128)
RUNS = {
    "movies": FinetuneConfig(task="classification", max_seq_length=48),
    "squad1": FinetuneConfig(task="squad_v1.1", max_seq_length=64, doc_stride=24,
                             max_query_length=16),
    "squad2": FinetuneConfig(task="squad_v2.0", max_seq_length=64, doc_stride=24,
                             max_query_length=16, joint_end_head=True, beam_size=5),
}


def make_runs(root):
  """{name: (Keras model, fine-tuned model dir)} for RUNS, and "disc": (Discriminator, its
  checkpoint dir) for the encoder formats. Random weights, fixed seeds."""
  from electra_tf.checkpoints.native import save_discriminator
  from electra_tf.model.networks import Discriminator, dummy_inputs

  tf_keras.utils.set_random_seed(0)
  made = {}
  for name, config in RUNS.items():
    model = build_finetune_model(model_for_task(config, TINY, 2))
    record = {"task": config.task, "encoder": TINY.to_dict(), "finetune": config.to_dict()}
    if name == "movies":
      record["spec"] = dataclasses.asdict(classification_data.MOVIE_REVIEWS)
    made[name] = (model, save_finetuned(model, record, builtin_vocab_path(),
                                        str(root / name / "best")))
  disc = Discriminator(TINY)
  disc(dummy_inputs())
  made["disc"] = (disc, str(root / "disc"))
  save_discriminator(disc, builtin_vocab_path(), made["disc"][1])
  return made


def real_inputs(name: str, n: int = 8) -> dict[str, np.ndarray]:
  """int32 [n, L] ids of real text for run `name`: movie reviews, or SQuAD questions with
  their paragraphs (truncated to the run's max_seq_length)."""
  tokenizer = WordPieceTokenizer(builtin_vocab_path())
  config = RUNS.get(name, RUNS["movies"])
  if name.startswith("squad"):
    examples, _ = squad_data.read_squad(builtin.squad_path("unittest"), is_training=False)
    rows = [classification_data.Example((e.question, e.context), 0) for e in examples[:n]]
    spec = dataclasses.replace(classification_data.MOVIE_REVIEWS, text_columns=("q", "c"))
  else:
    _, _, dev = classification_data.movie_reviews(seed=0)
    rows, spec = dev[:n], classification_data.MOVIE_REVIEWS
  encoded = classification_data.encode(rows, tokenizer, config.max_seq_length, spec)
  return {k: encoded[k] for k in ("input_ids", "input_mask", "segment_ids")}
