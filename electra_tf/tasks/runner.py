"""The fine-tuning command's work: resolve the checkpoint, vocab and data of a task, run it."""

from __future__ import annotations

import sys

from electra_tf import fileio, presets
from electra_tf.config import EncoderConfig, FinetuneConfig
from electra_tf.errors import UserError
from electra_tf.filenames import BEST_SUBDIR


def resolve_encoder(init_checkpoint: str | None, model_size: str):
  """(encoder config, checkpoint vocab path or None, read source or None) from the
  checkpoint or a preset."""
  if init_checkpoint:
    from electra_tf.checkpoints import converter

    source = converter.read_source(init_checkpoint)
    if not source.has_discriminator and not source.has_generator:
      raise UserError(f"{init_checkpoint} holds no encoder weights")
    return source.config.model, source.vocab_path, source
  return presets.get(model_size).model, None, None


def make_tokenizer(vocab_file: str | None, checkpoint_vocab: str | None,
                   encoder: EncoderConfig, overrides: dict[str, bool] | None = None):
  """The task's tokenizer and vocab path: the vocab's own spec, with `overrides` (the
  tokenizer flags set by the user) applied."""
  from electra_tf.data.tokenizer import make_tokenizer as make_tokenizer_of
  from electra_tf.data.vocab import builtin_vocab_path, load_vocab_overriding

  path = vocab_file or checkpoint_vocab or builtin_vocab_path()
  vocab = load_vocab_overriding(path, overrides or {})
  if vocab.size != encoder.vocab_size:
    raise UserError(f"the vocab {path} has {vocab.size} tokens but the model's embedding table "
                    f"has {encoder.vocab_size} rows; pass the checkpoint's vocab with --vocab_file")
  return make_tokenizer_of(vocab), path


def _first(items, limit):
  return list(items) if limit is None else list(items)[:limit]


def build_squad_task(flags_, config: FinetuneConfig, tokenizer, stream):
  from electra_tf.data import builtin
  from electra_tf.tasks import squad_data
  from electra_tf.tasks.squad import SquadTask

  train_file, predict_file = flags_.train_file, flags_.predict_file
  if config.version_2 and not (train_file and predict_file):
    raise UserError("--task=squad_v2.0 needs --train_file and --predict_file "
                    "(train-v2.0.json, dev-v2.0.json from the SQuAD site)")
  train_file = train_file or builtin.squad_path("train")
  predict_file = predict_file or builtin.squad_path("dev")
  train, report = squad_data.read_squad(train_file, is_training=True,
                                        version_2=config.version_2)
  if report.num_skipped:
    print(f"skipped {report.num_skipped} of {report.num_questions} training questions whose "
          f"answer is not at its offset (e.g. {report.skipped_ids[:3]})", file=stream)
  if not train:
    raise UserError(f"{train_file} holds no usable training questions ({report.num_questions} "
                    f"questions, {report.num_skipped} skipped); check --train_file")
  evals, _ = squad_data.read_squad(predict_file, is_training=False, version_2=config.version_2)
  cache_dir = flags_.cache_dir or fileio.join(flags_.output_dir, "cache")
  return SquadTask(config, tokenizer, _first(train, flags_.max_train_examples),
                   _first(evals, flags_.max_eval_examples), predict_file, cache_dir)


def build_classification_task(flags_, config: FinetuneConfig, tokenizer):
  from electra_tf.tasks import classification_data as data
  from electra_tf.tasks.classification import ClassificationTask

  if config.task == "movie_reviews":
    spec, train, dev = data.movie_reviews(seed=0)
  elif config.task.startswith("glue/"):
    name = config.task.split("/", 1)[1]
    spec, train = data.load_glue(name, "train", flags_.tfds_data_dir)
    dev_split = "validation_matched" if name == "mnli" else "validation"
    _, dev = data.load_glue(name, dev_split, flags_.tfds_data_dir)
  else:
    if not flags_.train_file or not flags_.text_columns:
      raise UserError("--task=classification needs --train_file and --text_columns "
                      "(and --label_column if it is not 'label')")
    if len(flags_.text_columns) not in (1, 2):
      raise UserError(f"--text_columns takes one or two columns, got {flags_.text_columns}")
    spec = data.infer_spec(flags_.train_file, tuple(flags_.text_columns), flags_.label_column,
                           regression=flags_.regression)
    train = data.read_table(flags_.train_file, spec)
    dev = data.read_table(flags_.dev_file, spec) if flags_.dev_file else []
    if not train:
      raise UserError(f"{flags_.train_file} has a header but no rows; check --train_file")
  return ClassificationTask(spec, _first(train, flags_.max_train_examples),
                            _first(dev, flags_.max_eval_examples), tokenizer, config)


def build_tagging_task(flags_, config: FinetuneConfig, tokenizer):
  from electra_tf.tasks import tagging_corpora, tagging_data
  from electra_tf.tasks.tagging import TaggingTask, make_spec

  if config.task in tagging_corpora.BUILTIN:
    train_path, train, dev = tagging_corpora.load(config.task)
    dev_path, jsonl = train_path, False
  else:
    if not flags_.train_file:
      raise UserError("--task=tagging needs --train_file (CoNLL columns or .jsonl), and "
                      "--dev_file to evaluate")
    train_path, dev_path = flags_.train_file, flags_.dev_file
    train = tagging_data.read_tagging_file(train_path, flags_.tag_column)
    dev = tagging_data.read_tagging_file(dev_path, flags_.tag_column) if dev_path else []
    jsonl = tagging_data.is_jsonl(dev_path or train_path)
  spec = make_spec(config.task, train, train_path, flags_.tag_scheme, jsonl)
  tagging_data.check_tags(dev, spec.scheme, dev_path, spec.label_names)
  return TaggingTask(spec, _first(train, flags_.max_train_examples),
                     _first(dev, flags_.max_eval_examples), tokenizer, config)


def run_from_flags(flags_, resolve_config, stream=None, tokenizer_overrides=None):
  """Everything finetune.py does after parsing flags; returns the FinetuneResult."""
  stream = stream or sys.stdout
  import tf_keras

  from electra_tf.training import strategy as strategy_lib
  from electra_tf.training.finetuning import run_finetuning

  if flags_.strategy == "multi_worker_mirrored":
    raise UserError("finetune.py runs on one machine (every worker would write the same "
                    "output_dir); use --strategy=mirrored on a multi-GPU host or tpu")
  # The strategy first: splitting the CPU must precede any TF work.
  strategy = strategy_lib.make_strategy(flags_.strategy, tpu=flags_.tpu,
                                        cpu_devices=flags_.cpu_devices)
  encoder, checkpoint_vocab, source = resolve_encoder(flags_.init_checkpoint, flags_.model_size)
  config = resolve_config(encoder.num_layers)
  strategy_lib.set_precision(config.precision)
  tf_keras.utils.set_random_seed(config.seed)
  tokenizer, vocab_path = make_tokenizer(flags_.vocab_file, checkpoint_vocab, encoder,
                                         tokenizer_overrides)
  if config.is_squad:
    task = build_squad_task(flags_, config, tokenizer, stream)
  elif config.is_tagging:
    task = build_tagging_task(flags_, config, tokenizer)
  else:
    task = build_classification_task(flags_, config, tokenizer)
  result = run_finetuning(task, config, encoder, flags_.output_dir, strategy,
                          init_checkpoint=flags_.init_checkpoint, init_source=source,
                          vocab=tokenizer.vocab, stream=stream)
  if result.best:
    shown = ", ".join(f"{k} {v:.4f}" for k, v in result.best.items() if isinstance(v, float))
    print(f"best epoch {result.best['epoch']}: {shown}; model in "
          f"{fileio.join(flags_.output_dir, BEST_SUBDIR)}", file=stream, flush=True)
  return result
