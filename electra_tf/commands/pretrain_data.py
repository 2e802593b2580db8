"""Where pretrain.py's examples come from: --train_data, or text built into model_dir, and
the held-out data.

`flag_values` is the command's absl FlagValues. Data built from text goes to model_dir/data (and
eval_data/ for the built-in corpus's held-out articles), or to data_<length>/ when a run's
later phase needs another length (training/phases.py).
"""

from __future__ import annotations

from electra_tf import fileio
from electra_tf.errors import UserError
from electra_tf.filenames import DATA_SUBDIR, EVAL_DATA_SUBDIR, HELD_OUT_SUBDIR


def resolve_data(flag_values, config, model_dir: str, is_multi_worker: bool, vocab):
  """TrainData from --train_data, or from text (--text_files or the built-in corpus) built
  into model_dir at config.max_seq_length."""
  from electra_tf.data import builtin, pretraining_data, records
  from electra_tf.data import manifest as manifest_lib
  from electra_tf.training import phases
  from electra_tf.training.pretraining import TrainData

  if flag_values.text_files and flag_values.train_data:
    raise UserError("give --text_files or --train_data, not both")
  if flag_values.train_data:
    files = records.resolve_files(flag_values.train_data, vocab, config.max_seq_length)
    records.check_first_record(files, config.max_seq_length)
    entries = [e for e in flag_values.train_data.split(",") if e.strip()]
    # Example and token counts (for "data pass") come from a single data dir's manifest.
    manifest = manifest_lib.read_manifest(entries[0], required=False) if len(entries) == 1 \
        else None
    if manifest is None:
      return TrainData(files, vocab)
    return TrainData(files, vocab, manifest.examples, manifest.tokens)
  if is_multi_worker:
    raise UserError("--strategy=multi_worker_mirrored needs --train_data built beforehand "
                    "(electra-build-data), so that workers do "
                    "not build the same data at once")
  text_files = flag_values.text_files
  if not text_files:
    text_files = builtin.builtin_corpus(builtin.default_cache_dir())
    print(f"no --text_files or --train_data: using the built-in corpus ({len(text_files)} "
          "files of Wikipedia paragraphs from SQuAD v1.1 train)", flush=True)
  data_dir = pretraining_data.build_if_needed(
      text_files, vocab, phases.text_data_dir(model_dir, DATA_SUBDIR, config.max_seq_length),
      config.max_seq_length, seed=config.seed)
  manifest = manifest_lib.read_manifest(data_dir)
  print(f"data: {data_dir} ({manifest.documents:,} documents, {manifest.examples:,} examples, "
        f"{manifest.tokens:,} tokens)", flush=True)
  return TrainData(manifest.shard_paths, vocab, manifest.examples, manifest.tokens)


def resolve_held_out(flag_values, config, model_dir: str, vocab):
  """The held-out data: --eval_data, or the built-in corpus's held-out articles."""
  from electra_tf.data import builtin, pretraining_data, records
  from electra_tf.data import manifest as manifest_lib
  from electra_tf.training import phases
  from electra_tf.training.evaluation import HeldOut

  every = config.checkpoint_steps if flag_values.eval_every is None else flag_values.eval_every
  set_aside = flag_values.train_data and fileio.join(flag_values.train_data, HELD_OUT_SUBDIR)
  eval_data = flag_values.eval_data
  if not eval_data and set_aside and manifest_lib.is_data_dir(set_aside):
    print(f"held-out data: {set_aside} (set aside when the data was built)", flush=True)
    eval_data = set_aside
  if eval_data:
    files = records.resolve_files(eval_data, vocab, config.max_seq_length)
    records.check_first_record(files, config.max_seq_length)
  elif not (flag_values.text_files or flag_values.train_data):
    text = builtin.builtin_corpus(builtin.default_cache_dir(), split="dev")
    data_dir = pretraining_data.build_if_needed(
        text, vocab, phases.text_data_dir(model_dir, EVAL_DATA_SUBDIR, config.max_seq_length),
        config.max_seq_length,
        seed=config.seed, show_progress=False)
    files = manifest_lib.read_manifest(data_dir).shard_paths
  elif flag_values.eval_only:
    raise UserError("--eval_only needs --eval_data (held-out data built with this vocab)")
  else:
    return None
  return HeldOut(files, vocab, every, flag_values.eval_batches or None)
