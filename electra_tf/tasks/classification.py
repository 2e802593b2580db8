"""Sentence and sentence-pair classification/regression as a fine-tuning Task."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from electra_tf.config import EncoderConfig, FinetuneConfig
from electra_tf.data.tokenizer import WordPieceTokenizer
from electra_tf.model.finetune_models import LABEL, ElectraClassifier, model_for_task
from electra_tf.tasks import metrics as metrics_lib
from electra_tf.tasks.classification_data import Example, TaskSpec, encode


@dataclasses.dataclass
class ClassificationTask:
  """A TaskSpec with its encoded train/dev sets.

  Args:
    spec: columns, labels and metrics.
    train, dev: examples (dev may be empty: no evaluation).
    tokenizer: WordPiece tokenizer of the checkpoint's vocab.
    config: fine-tuning settings.
  """

  spec: TaskSpec
  train: Sequence[Example]
  dev: Sequence[Example]
  tokenizer: WordPieceTokenizer
  config: FinetuneConfig

  def __post_init__(self):
    self._dev_encoded = None

  @property
  def name(self) -> str:
    return self.spec.name

  @property
  def main_metric(self) -> str:
    return self.spec.main_metric

  def build_model(self, encoder_config: EncoderConfig) -> ElectraClassifier:
    return model_for_task(self.config, encoder_config, self.spec.num_labels)

  def _encode(self, examples) -> dict[str, np.ndarray]:
    return encode(examples, self.tokenizer, self.config.max_seq_length, self.spec)

  def train_dataset(self) -> tuple[tf.data.Dataset, int]:
    return tf.data.Dataset.from_tensor_slices(self._encode(self.train)), len(self.train)

  def eval_dataset(self) -> tf.data.Dataset | None:
    if not self.dev:
      return None
    self._dev_encoded = self._encode(self.dev)
    return tf.data.Dataset.from_tensor_slices(self._dev_encoded)

  def predictions(self, outputs: dict[str, np.ndarray]) -> np.ndarray:
    """Class indices [N] (or regression values) from the model's batched outputs."""
    if self.spec.is_regression:
      return np.asarray(outputs["predictions"], np.float32)
    return np.argmax(outputs["logits"], -1)

  def evaluate(self, outputs: dict[str, np.ndarray]) -> tuple[dict[str, float], dict[str, str]]:
    predictions = self.predictions(outputs)
    labels = self._dev_encoded[LABEL]
    scores = {k: float(v) for k, v in
              metrics_lib.compute(self.spec.metrics, labels, predictions).items()}
    names = self.spec.label_names
    rows = [{"index": i, "prediction": (names[int(p)] if names else float(p))}
            for i, p in enumerate(predictions)]
    if not self.spec.is_regression:
      for row, probs in zip(rows, outputs["probabilities"]):
        row["probabilities"] = [round(float(x), 6) for x in probs]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    return scores, {"dev_predictions.jsonl": text}

  def metadata(self) -> dict[str, Any]:
    return {"spec": dataclasses.asdict(self.spec), "max_seq_length": self.config.max_seq_length,
            "tokenizer": self.tokenizer.spec.to_dict()}
