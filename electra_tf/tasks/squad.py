"""SQuAD 1.1 / 2.0 extractive question answering as a fine-tuning Task."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from electra_tf.config import EncoderConfig, FinetuneConfig
from electra_tf.data.tokenizer import WordPieceTokenizer
from electra_tf.model.finetune_models import ElectraSpanQA, model_for_task
from electra_tf.tasks import squad_cache, squad_data, squad_postprocess


def raw_results(outputs: dict[str, np.ndarray]) -> list[squad_postprocess.RawResult]:
  """One RawResult per feature from the model's batched prediction outputs."""
  joint = "start_top_index" in outputs
  impossible = outputs.get("impossible_logit")
  return [
      squad_postprocess.RawResult(
          unique_id=int(uid), start_logits=outputs["start_logits"][i],
          end_logits=outputs["end_logits"][i],
          start_top_index=outputs["start_top_index"][i] if joint else None,
          impossible_logit=None if impossible is None else float(impossible[i]))
      for i, uid in enumerate(outputs["unique_id"])]


@dataclasses.dataclass
class SquadTask:
  """SQuAD examples turned into windowed features (cached as TFRecords) and scored officially.

  Args:
    config: fine-tuning settings (sizes, heads, n-best).
    tokenizer: WordPiece tokenizer of the checkpoint's vocab.
    train_examples, eval_examples: read with squad_data.read_squad (eval may be empty).
    predict_file: the eval examples' file, which the official scorer reads.
    cache_dir: where feature TFRecords are cached.
  """

  config: FinetuneConfig
  tokenizer: WordPieceTokenizer
  train_examples: Sequence[squad_data.SquadExample]
  eval_examples: Sequence[squad_data.SquadExample]
  predict_file: str | None
  cache_dir: str

  def __post_init__(self):
    self._eval_features = None

  @property
  def name(self) -> str:
    return self.config.task

  @property
  def main_metric(self) -> str:
    return "best_f1" if self.config.version_2 else "f1"

  def build_model(self, encoder_config: EncoderConfig) -> ElectraSpanQA:
    return model_for_task(self.config, encoder_config)

  def _features(self, examples, is_training: bool):
    c = self.config
    return squad_cache.cached_features(
        list(examples), self.tokenizer, self.cache_dir, max_seq_length=c.max_seq_length,
        doc_stride=c.doc_stride, max_query_length=c.max_query_length, is_training=is_training)

  def train_dataset(self) -> tuple[tf.data.Dataset, int]:
    features, path = self._features(self.train_examples, True)
    dataset = squad_cache.load_features_dataset(path, max_seq_length=self.config.max_seq_length,
                                               is_training=True)
    return dataset, len(features)

  def eval_dataset(self) -> tf.data.Dataset | None:
    if not self.eval_examples:
      return None
    self._eval_features, path = self._features(self.eval_examples, False)
    return squad_cache.load_features_dataset(path, max_seq_length=self.config.max_seq_length,
                                            is_training=False)

  def predict(self, outputs: dict[str, np.ndarray]):
    """(predictions, n-best, null odds) for the eval examples from raw model outputs."""
    c = self.config
    return squad_postprocess.postprocess(
        list(self.eval_examples), self._eval_features, raw_results(outputs),
        n_best_size=c.n_best_size, max_answer_length=c.max_answer_length,
        version_2=c.version_2)

  def evaluate(self, outputs: dict[str, np.ndarray]) -> tuple[dict[str, float], dict[str, str]]:
    predictions, nbest, null_odds = self.predict(outputs)
    qas_ids = [e.qas_id for e in self.eval_examples]
    scores = squad_postprocess.evaluate(
        self.predict_file, predictions, version_2=self.config.version_2,
        null_odds=null_odds if self.config.version_2 else None, qas_ids=qas_ids)
    artifacts = {"nbest_predictions.json": json.dumps(nbest, indent=1)}
    if self.config.version_2:
      threshold = scores["best_f1_thresh"]
      predictions = squad_postprocess.apply_null_threshold(predictions, null_odds, threshold)
      artifacts["null_odds.json"] = json.dumps(null_odds, indent=1)
    artifacts["predictions.json"] = json.dumps(predictions, indent=1)
    return {k: float(v) for k, v in scores.items()}, artifacts

  def metadata(self) -> dict[str, Any]:
    c = self.config
    return {"max_seq_length": c.max_seq_length, "doc_stride": c.doc_stride,
            "max_query_length": c.max_query_length, "tokenizer": self.tokenizer.spec.to_dict()}
