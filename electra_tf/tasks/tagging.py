"""Token tagging (named entities, chunks, part of speech) as a fine-tuning Task."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from electra_tf.config import EncoderConfig, FinetuneConfig
from electra_tf.model.finetune_models import model_for_task
from electra_tf.model.tagger import ElectraTagger
from electra_tf.tasks import tagging_data as data
from electra_tf.tasks.tagging_features import Windows, encode_windows, word_pieces
from electra_tf.tasks.tagging_metrics import tagging_metrics


@dataclasses.dataclass(frozen=True)
class TaggingSpec:
  """What a tagging task predicts and how it is scored.

  Args:
    name: task name (results and exports carry it).
    label_names: the tags in label-index order.
    scheme: iob1, iob2, bioes, or "none" for plain tags.
    main_metric: picks the best epoch: entity F1 (conlleval's) for a chunk scheme, token
      accuracy for plain tags.
    jsonl: the dev predictions are written as JSON lines (else CoNLL columns).
  """

  name: str
  label_names: tuple[str, ...]
  scheme: str
  main_metric: str
  jsonl: bool = False

  @property
  def num_labels(self) -> int:
    return len(self.label_names)


def make_spec(name: str, train: Sequence[data.Sentence], train_path: str,
              scheme: str | None = None, jsonl: bool = False) -> TaggingSpec:
  """The spec of a training set: its tags, and its scheme (given, or detected) checked."""
  scheme = scheme or data.detect_scheme(train, train_path)
  data.check_tags(train, scheme, train_path)
  return TaggingSpec(name, data.label_list(train), scheme,
                     "accuracy" if scheme == data.NO_SCHEME else "f1", jsonl)


@dataclasses.dataclass
class TaggingTask:
  """A TaggingSpec with its train/dev sentences, encoded as word-piece windows.

  Args:
    spec: tags, scheme, metrics.
    train, dev: sentences (dev may be empty: no evaluation).
    tokenizer: the checkpoint's tokenizer (`tokenize`, `vocab`).
    config: fine-tuning settings (max_seq_length, and doc_stride between windows).
  """

  spec: TaggingSpec
  train: Sequence[data.Sentence]
  dev: Sequence[data.Sentence]
  tokenizer: Any
  config: FinetuneConfig

  def __post_init__(self):
    self._dev_windows: Windows | None = None

  @property
  def name(self) -> str:
    return self.spec.name

  @property
  def main_metric(self) -> str:
    return self.spec.main_metric

  def build_model(self, encoder_config: EncoderConfig) -> ElectraTagger:
    return model_for_task(self.config, encoder_config, self.spec.num_labels)

  def encode(self, sentences: Sequence[data.Sentence]) -> Windows:
    index = {name: i for i, name in enumerate(self.spec.label_names)}
    vocab = self.tokenizer.vocab
    return encode_windows(word_pieces([s.words for s in sentences], self.tokenizer),
                          [[index[t] for t in s.tags] for s in sentences],
                          self.config.max_seq_length, self.config.doc_stride,
                          vocab.cls_id, vocab.sep_id, vocab.pad_id)

  def train_dataset(self) -> tuple[tf.data.Dataset, int]:
    windows = self.encode(self.train)
    return tf.data.Dataset.from_tensor_slices(windows.features), len(windows)

  def eval_dataset(self) -> tf.data.Dataset | None:
    if not self.dev:
      return None
    self._dev_windows = self.encode(self.dev)
    return tf.data.Dataset.from_tensor_slices(self._dev_windows.features)

  def predicted_tags(self, logits: np.ndarray, windows: Windows) -> list[list[str]]:
    """Each word's tag from its window of most context; logits [N, L, num_labels]."""
    names = self.spec.label_names
    return [[names[i] for i in sentence]
            for sentence in windows.gather(np.argmax(logits, -1))]

  def evaluate(self, outputs: dict[str, np.ndarray]) -> tuple[dict[str, float], dict[str, str]]:
    predicted = self.predicted_tags(outputs["logits"], self._dev_windows)
    scores = tagging_metrics([s.tags for s in self.dev], predicted, self.spec.scheme)
    name = "dev_predictions." + ("jsonl" if self.spec.jsonl else "conll")
    return scores, {name: data.format_predictions(self.dev, predicted, self.spec.jsonl)}

  def metadata(self) -> dict[str, Any]:
    return {"spec": dataclasses.asdict(self.spec),
            "max_seq_length": self.config.max_seq_length}
