r"""Pretrain ELECTRA (generator + discriminator, replaced-token detection) or the MLM baseline.

With no flags it trains the demo preset on the built-in corpus (Wikipedia paragraphs of
SQuAD v1.1 train) with the bert-base-uncased vocab, evaluating on held-out articles:

  python pretrain.py                    (installed: electra-pretrain)
  python pretrain.py --model_size=tiny --text_files='corpus/*.txt' --vocab_file=vocab.txt \
      --model_dir=runs/tiny --num_train_steps=2000
  python pretrain.py --model_size=small --train_data='data/*.tfrecord' --strategy=mirrored
"""

from __future__ import annotations

import json
import os
import sys

from absl import flags, logging

from electra_tf import cli, fileio, presets  # stdlib only: --help stays fast
from electra_tf import config as config_lib
from electra_tf.commands import tokenizer_flags
from electra_tf.commands.pretrain_data import resolve_data, resolve_held_out
from electra_tf.config import ConfigError, EncoderConfig, PretrainConfig
from electra_tf.errors import check_field_types
from electra_tf.filenames import DISCRIMINATOR_SUBDIR

# Modules that load TensorFlow are imported inside the functions that use them: --help and
# flag errors answer before TensorFlow starts.
FLAGS = flags.FLAGS

flags.DEFINE_string("model_size", "demo", "Preset: demo, tiny, small, base or large "
                    "(configs/), or the path of your own preset file (a copy of one, edited).")
flags.DEFINE_enum("strategy", "one_device", list(config_lib.STRATEGIES),
                  "tf.distribute strategy. multi_worker_mirrored reads TF_CONFIG.")
flags.DEFINE_string("tpu", None, "TPU name or grpc://host:port address for --strategy=tpu.")
flags.DEFINE_float("tpu_timeout", 60.0, "Seconds to wait for the TPU before failing.")
flags.DEFINE_integer("cpu_devices", 0,
                     "Split the host CPU into N logical devices (to run --strategy=mirrored "
                     "without accelerators).")
flags.DEFINE_string("text_files", None,
                    "Glob of raw UTF-8 text (one sentence per line, blank line between "
                    "documents). Tokenized and packed into TFRecords under model_dir/data.")
flags.DEFINE_string("train_data", None,
                    "A data dir from electra-build-data (its manifest is "
                    "checked), or comma-separated globs of its .tfrecord files.")
flags.DEFINE_string("vocab_file", None,
                    "WordPiece vocab.txt or SentencePiece .model (its tokenizer settings "
                    "beside it). Default: the checkpoint's (with --init_checkpoint) or the "
                    "bert-base-uncased vocab (requirements-data.txt).")
tokenizer_flags.define_flags()
flags.DEFINE_string("model_dir", None, "Checkpoints, TensorBoard, config. Default runs/<size>.")
flags.DEFINE_integer("num_train_steps", None, "Total optimizer steps (preset default).")
flags.DEFINE_integer("batch_size", None, "Global batch size across all replicas: the examples "
                     "of one optimizer update.")
flags.DEFINE_integer("gradient_accumulation_steps", None,
                     "Run each replica's share of --batch_size as this many micro-batches, one "
                     "after another, and apply their summed gradients as one update: the same "
                     "update in less memory. --batch_size must be a multiple of replicas x "
                     "this. May change on resume.")
flags.DEFINE_integer("max_seq_length", None, "Tokens per example.")
flags.DEFINE_float("learning_rate", None, "Peak learning rate.")
flags.DEFINE_integer("warmup_steps", None, "Linear warmup steps.")
flags.DEFINE_enum("optimizer", None, list(config_lib.OPTIMIZERS), "Optimizer (preset default).")
flags.DEFINE_enum("precision", None, list(config_lib.PRECISIONS),
                  "Compute precision; logits and losses stay float32.")
flags.DEFINE_enum("objective", None, list(config_lib.OBJECTIVES),
                  "electra: replaced-token detection on every token; electra_15: on the "
                  "masked positions only; replace_mlm: masked-LM on generator samples at the "
                  "masked positions; all_tokens_mlm: masked-LM on every token with a copy "
                  "mechanism; mlm: the BERT masked-LM baseline (docs/objectives.md).")
flags.DEFINE_enum("embedding_sharing", None, list(config_lib.EMBEDDING_SHARING),
                  "What generator and discriminator share: tied embeddings (the paper's), "
                  "none, all weights (equal sizes), or gdes (gradient-disentangled).")
flags.DEFINE_integer("two_stage_steps", None,
                     "Two-stage training: the generator alone for this many steps, then the "
                     "discriminator, started from it, with the generator frozen (needs "
                     "--generator_fraction=1 --embedding_sharing=none).")
flags.DEFINE_float("generator_fraction", None, "Generator width as a fraction of the "
                   "discriminator's.")
flags.DEFINE_float("mask_prob", None, "Fraction of tokens masked.")
flags.DEFINE_float("disc_weight", None, "Weight of the discriminator loss (50).")
flags.DEFINE_float("temperature", None, "Generator sampling temperature.")
flags.DEFINE_integer("seed", None, "Random seed for data order, masking, sampling and dropout.")
flags.DEFINE_bool("deterministic", None,
                  "Data order, masking, sampling and dropout depend only on (seed, step) and "
                  "the input position is restored on resume: a run killed at any point and "
                  "restarted ends with the weights of an uninterrupted one. Turns on TF op "
                  "determinism; reads run in order.")
flags.DEFINE_enum("on_nonfinite", None, list(config_lib.NONFINITE_POLICIES),
                  "A non-finite loss or gradient is never applied; stop: end the run (exit 1, "
                  "last good checkpoint kept); skip: drop that step's update and continue.")
flags.DEFINE_integer("checkpoint_steps", None, "Save a checkpoint every N steps.")
flags.DEFINE_integer("keep_checkpoints", None, "Checkpoints kept.")
flags.DEFINE_integer("log_steps", None, "Print and log to TensorBoard every N steps.")
flags.DEFINE_integer("steps_per_execution", None, "Train steps per tf.function call.")
flags.DEFINE_bool("jit_compile", False,
                  "Compile the train step with XLA (one device). On CPUs it is slower: XLA's "
                  "matrix products are slower than the oneDNN kernels TensorFlow calls "
                  "(docs/benchmarks.md).")
flags.DEFINE_bool("fused_kernels", True,
                  "Without --jit_compile, run GELU and dropout in the training step as "
                  "XLA-fused kernels (dropout masks then come from SplitMix64 instead of "
                  "Philox). --nofused_kernels: plain ops.")
flags.DEFINE_string("init_checkpoint", None,
                    "Start from these weights (released TF1 checkpoint, Hugging Face folder, "
                    "electra-convert output, or another run's model_dir). Sizes "
                    "come from the checkpoint; no optimizer slots are needed.")
flags.DEFINE_string("eval_data", None,
                    "Held-out data (a data dir or globs, built like --train_data) evaluated "
                    "every --eval_every steps and at the end: generator MLM loss and "
                    "accuracy, discriminator loss, accuracy and AUC, on the same batches, "
                    "masks and draws each time (TensorBoard: model_dir/eval). Default with "
                    "the built-in corpus: its held-out articles (SQuAD v1.1 dev contexts); with "
                    "a --train_data dir built with --holdout_fraction: its held_out/ split.")
flags.DEFINE_integer("eval_every", None, "Steps between held-out evaluations (0: at the end "
                     "only). Default: checkpoint_steps.")
flags.DEFINE_integer("eval_batches", 50, "Global batches per held-out evaluation.")
flags.DEFINE_bool("eval_only", False, "Evaluate model_dir's newest checkpoint on the held-out "
                  "data once, print the figures and exit (no training).")
flags.DEFINE_bool("new_phase", False,
                  "Continue model_dir's run in a new phase: --max_seq_length, --batch_size and "
                  "max_predictions_per_seq may differ from its current phase's (e.g. 128 "
                  "tokens, then 512, on data built at 512); weights, optimizer state, step and "
                  "learning-rate schedule carry on. With the current phase's settings it is "
                  "an ordinary resume.")
flags.DEFINE_integer("phase_end_step", None,
                     "Stop at this step, its checkpoint saved, with the learning-rate schedule "
                     "still over --num_train_steps: the end of a phase (then --new_phase).")
flags.DEFINE_string("config_overrides", None,
                    "JSON object of further config keys, e.g. '{\"model.hidden_size\": 128}'.")

# Flags that map one-to-one onto PretrainConfig fields.
_CONFIG_FLAGS = ("num_train_steps", "batch_size", "gradient_accumulation_steps",
                 "max_seq_length", "learning_rate", "warmup_steps", "optimizer", "precision",
                 "objective", "embedding_sharing", "two_stage_steps", "generator_fraction",
                 "mask_prob", "disc_weight", "temperature", "seed", "deterministic",
                 "on_nonfinite", "checkpoint_steps", "keep_checkpoints", "log_steps",
                 "steps_per_execution")


def resolve_config():

  config = presets.get(FLAGS.model_size)
  changes = {name: FLAGS[name].value for name in _CONFIG_FLAGS if FLAGS[name].value is not None}
  if FLAGS.config_overrides:
    try:
      extra = json.loads(FLAGS.config_overrides)
    except json.JSONDecodeError as exc:
      raise ConfigError(f"--config_overrides is not valid JSON: {exc}") from exc
    if not isinstance(extra, dict):
      raise ConfigError("--config_overrides must be a JSON object")

    # Name the key of a wrongly typed value instead of failing in a comparison later.
    check_field_types(PretrainConfig, {k: v for k, v in extra.items() if "." not in k},
                             "--config_overrides")
    model_keys = {k.split(".", 1)[1]: v for k, v in extra.items() if k.startswith("model.")}
    check_field_types(EncoderConfig, model_keys, "--config_overrides",
                             display={k: f"model.{k}" for k in model_keys})
    changes.update(extra)
  try:
    return config.replace(**changes) if changes else config
  except TypeError as exc:
    raise ConfigError(f"invalid config value: {exc}") from exc


def apply_init_checkpoint(config):
  """(config with the checkpoint's sizes and weight sharing, the read source) for
  --init_checkpoint."""
  from electra_tf.checkpoints import converter

  source = converter.read_source(FLAGS.init_checkpoint)
  changes = {"model": source.config.model}
  if source.has_generator:
    changes["generator"] = source.config.generator
    # How the networks share weights is the checkpoint's, unless the flag says otherwise.
    if FLAGS.embedding_sharing is None:
      changes["embedding_sharing"] = source.config.embedding_sharing
  return config.replace(**changes), source


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)  # TF's checkpoint INFO lines drown the progress

  with cli.one_line_errors():
    config = resolve_config()
    model_dir = FLAGS.model_dir or os.path.join("runs", presets.run_name(FLAGS.model_size))
    cli.check_output_dir(model_dir, "--model_dir")
    cli.check_input_paths({f"--{name}": FLAGS[name].value for name in (
        "text_files", "train_data", "eval_data", "vocab_file", "init_checkpoint")})
    from electra_tf.training import phases, pretraining
    from electra_tf.training import strategy as strategy_lib

    strategy_lib.set_precision(config.precision)
    strategy = strategy_lib.make_strategy(FLAGS.strategy, tpu=FLAGS.tpu,
                                          cpu_devices=FLAGS.cpu_devices,
                                          tpu_timeout=FLAGS.tpu_timeout)
    source = None
    if FLAGS.init_checkpoint:
      config, source = apply_init_checkpoint(config)
    from electra_tf.data import vocab as vocab_lib

    vocab = tokenizer_flags.load_vocab(FLAGS, FLAGS.vocab_file or (source and source.vocab_path)
                                       or vocab_lib.builtin_vocab_path())
    if (FLAGS.vocab_file and not source and vocab.size != config.model.vocab_size
        and "model.vocab_size" not in (FLAGS.config_overrides or "")):
      # A vocab of one's own sets the embedding table's size (a checkpoint's is fixed).
      config = config.replace(**{"model.vocab_size": vocab.size})
      print(f"model.vocab_size {vocab.size}, the size of {FLAGS.vocab_file}", flush=True)
    # Fail on settings before spending minutes building data.
    phase = phases.PhaseRequest(FLAGS.new_phase, FLAGS.phase_end_step)
    try:
      pretraining.preflight(config, model_dir, strategy, vocab, phase)
    except phases.PhaseOver as exc:
      print(exc, flush=True)  # a job script rerun from its start reaches the current phase
      return
    held_out = resolve_held_out(FLAGS, config, model_dir, vocab)
    if FLAGS.eval_only:
      from electra_tf.training import evaluation

      model = pretraining.build_model(config, strategy, fused_kernels=FLAGS.fused_kernels)
      evaluation.evaluate_saved_run(model, model_dir, held_out, strategy)
      return
    data = resolve_data(FLAGS, config, model_dir, FLAGS.strategy == "multi_worker_mirrored",
                        vocab)
    try:
      result = pretraining.run_pretraining(config, data, model_dir, strategy,
                                           jit_compile=FLAGS.jit_compile, init_source=source,
                                           fused_kernels=FLAGS.fused_kernels,
                                           held_out=held_out, phase=phase)
    except pretraining.Preempted as exc:
      sys.exit(exc.exit_code)  # the checkpoint is saved and the line printed
    print_summary(model_dir, result)


def print_summary(model_dir: str, result) -> None:
  """What the run produced, its held-out figures, and what to run next."""
  export = fileio.join(model_dir, DISCRIMINATOR_SUBDIR)
  lines = ["", f"done: {model_dir} (checkpoints/, TensorBoard in train/ and eval/: "
           f"tensorboard --logdir {model_dir})"]
  lines.extend(result.eval_summary)
  lines.append(f"the encoder for fine-tuning: {export}")
  lines.append("next: fine-tune it, e.g. python finetune.py --task=movie_reviews "
               f"--init_checkpoint={export} --output_dir={model_dir}-movie_reviews")
  print("\n".join(lines), flush=True)


def run():
  """The console script (and `python pretrain.py` in a checkout)."""
  cli.run_command(main, __name__)


if __name__ == "__main__":
  run()
