"""Text files -> packed, tokenized TFRecord shards + manifest.json, on every core.

Input: UTF-8 text, one sentence (or line) per line, a blank line between documents.
The corpus is cut into units at document boundaries (about one per 64 MB of text and at
least one per worker); each worker process tokenizes and packs a unit into its own shard.
Everything is written into a staging dir beside the output dir and renamed when complete;
for a remote output dir (gs://) the staging dir is local and its shards are copied, the
manifest last (electra_tf.atomic), so workers never write to the remote file system.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import multiprocessing
import os
import re
import sys
import time

from electra_tf import fileio
from electra_tf.data import io_utils, shard_writer
from electra_tf.data.manifest import (
  RECORD_INDEX_EVERY,
  Manifest,
  ShardInfo,
  check_manifest,
  input_infos,
  is_data_dir,
  read_manifest,
)
from electra_tf.data.vocab import Vocab, load_vocab
from electra_tf.errors import UserError
from electra_tf.filenames import HELD_OUT_SUBDIR, MANIFEST_NAME

__all__ = ["build_pretraining_data", "build_if_needed", "read_manifest", "check_manifest",
           "Manifest"]

TEXT_BYTES_PER_SHARD = 64 << 20  # records take about as many bytes as the text they hold
# A worker process spends ~5 s importing TensorFlow, while one core packs ~8 MB/s of text:
# with num_workers unset, small corpora (tests, demos) are built in-process instead.
MIN_BYTES_PER_AUTO_WORKER = 8 << 20


def plan_units(files: list[str], num_units: int) -> list[tuple[tuple[str, int, int], ...]]:
  """Cuts the concatenated files into about `num_units` byte ranges at document ends."""
  sizes = [fileio.getsize(f) for f in files]
  total = sum(sizes)
  starts = [0, *itertools.accumulate(sizes)][:-1]
  bounds = {(0, 0), (len(files), 0)}
  for k in range(1, num_units):
    target = k * total // num_units
    i = max(j for j in range(len(files)) if starts[j] <= target and sizes[j])
    cut = io_utils.document_cut(files[i], target - starts[i])
    bounds.add((i, cut) if cut < sizes[i] else (i + 1, 0))
  bounds = sorted(bounds)
  units = []
  for (first, first_at), (last, last_at) in zip(bounds, bounds[1:], strict=False):
    segments = []
    for i in range(first, min(last, len(files) - 1) + 1):
      start = first_at if i == first else 0
      end = last_at if i == last else sizes[i]
      if end > start:
        segments.append((files[i], start, end))
    if segments:
      units.append(tuple(segments))
  return units


class _Progress:
  """One status line on stderr: documents, MB done of total, MB/s and ETA."""

  def __init__(self, total_bytes: int, enabled: bool):
    self.total, self.enabled = total_bytes, enabled
    self.done = self.documents = 0
    self.start = self.last = time.monotonic()
    self.first = None  # (time, bytes) of the first report: rates exclude worker start-up
    self.tty = sys.stderr.isatty()

  def update(self, message: tuple[int, int]) -> None:
    if self.first is None:
      self.first = (time.monotonic(), self.done)
    self.done += message[0]
    self.documents += message[1]

  def rate(self) -> float:
    """Bytes per second since processing started."""
    now = time.monotonic()
    if self.first is None or now - self.first[0] < 0.5:
      return self.done / max(now - self.start, 1e-9)
    return (self.done - self.first[1]) / (now - self.first[0])

  def show(self, final: bool = False) -> None:
    now = time.monotonic()
    if not self.enabled or (not final and now - self.last < (1.0 if self.tty else 10.0)):
      return
    self.last = now
    rate = self.rate()
    eta = "-" if rate <= 0 else time.strftime("%H:%M:%S",
                                               time.gmtime((self.total - self.done) / rate))
    line = (f"build_pretraining_data: {self.documents:,} documents, "
            f"{self.done / 1e6:,.1f}/{self.total / 1e6:,.1f} MB, {rate / 1e6:.2f} MB/s, "
            f"ETA {eta}")
    end = "\n" if final or not self.tty else ""
    print(("\r" if self.tty else "") + line, end=end, file=sys.stderr, flush=True)


def _run_units(units: list[shard_writer.Unit], num_workers: int,
               progress: _Progress) -> list[dict]:
  if num_workers == 1:  # in-process: no worker start-up cost for small builds and tests

    def report(message: tuple[int, int]) -> None:
      progress.update(message)
      progress.show()

    return [shard_writer.build_unit(unit, report) for unit in units]
  # spawn, not fork: the caller (pretrain.py) may already run TensorFlow's threads.
  context = multiprocessing.get_context("spawn")
  queue = context.Queue()
  with context.Pool(num_workers, initializer=shard_writer.init_worker, initargs=(queue,)) as pool:
    pending = pool.map_async(shard_writer.build_unit, units, chunksize=1)
    while True:
      pending.wait(0.2)
      while not queue.empty():
        progress.update(queue.get())
      progress.show()
      if pending.ready():
        return pending.get()  # re-raises a worker's UserError here


def _check_inputs(files: list[str], pattern: str) -> None:
  if not sum(fileio.getsize(f) for f in files):
    raise UserError(f"no text in {pattern}: the files are empty; give UTF-8 text, one "
                    "sentence per line, a blank line between documents")
  for path in files:  # catch the usual binary mistakes (.gz, .tfrecord) before any work
    with fileio.open(path, "rb") as f:
      head = f.read(8192)
    if b"\0" in head:
      io_utils.decode_line(head, path, 0)  # raises, naming the NUL's offset


_SHARD_NAME = re.compile(r"shard-\d{5}\.tfrecord")


def _check_output_dir(output_dir: str, overwrite: bool) -> None:
  fileio.check_path(output_dir, "--output_dir")
  if fileio.isfile(output_dir):
    raise UserError(f"--output_dir {output_dir} is a file; give a directory path")
  names = fileio.listdir(output_dir) if fileio.isdir(output_dir) else []
  if is_data_dir(output_dir):
    if not overwrite:
      raise UserError(f"{output_dir} already holds pretraining data; pass --overwrite to "
                      "replace it or choose another --output_dir")
  elif names and all(_SHARD_NAME.fullmatch(n) or n == HELD_OUT_SUBDIR for n in names):
    # Shards without their manifest: a copy to a remote file system that never finished.
    if not overwrite:
      raise UserError(f"{output_dir} holds an unfinished build (shards, no {MANIFEST_NAME}); "
                      "pass --overwrite to replace it or choose another --output_dir")
  elif names:
    # Never delete what we did not write: our builds only ever rename a finished dir here.
    raise UserError(f"{output_dir} exists and is not a pretraining data dir (no "
                    f"{MANIFEST_NAME}); remove it or choose another --output_dir")


def build_pretraining_data(input_files: str | list[str], vocab: Vocab | str, output_dir: str,
                           max_seq_length: int = 128,
                           num_workers: int | None = None, seed: int = 0,
                           overwrite: bool = False, min_shards: int = 1,
                           show_progress: bool = True,
                           holdout_fraction: float = 0.0) -> Manifest:
  """Builds TFRecord shards of packed examples and their manifest in `output_dir`.

  Args:
    input_files: comma-separated globs, or a list of globs, of UTF-8 text files.
    vocab: a `Vocab` (its spec says how text is tokenized) or a vocab file path.
    output_dir: the data dir to create; it appears only once complete.
    max_seq_length: L; every record holds exactly L ids, zero padded.
    num_workers: processes to use. None or 0: every core, but no more than one per
      8 MB of text (below that, starting a TF worker costs more than it saves).
    seed: the output is the same for the same seed, inputs and shard count.
    overwrite: replace an existing data dir.
    min_shards: at least this many shards (e.g. one per input host); there are also at
      least one per worker and one per 64 MB of text.
    show_progress: print a progress line on stderr.
    holdout_fraction: the share of documents set aside, whole, in `output_dir/held_out`
      (a data dir of its own, for `pretrain.py --eval_data`); each document is drawn
      with this probability from a stream seeded by `seed`. 0 builds no held-out split
      and leaves the training data exactly as without the option.

  Returns:
    The manifest of the finished data dir.

  Raises:
    UserError: no matching, empty, binary or non-UTF-8 files; a bad output dir.
  """
  vocab = load_vocab(vocab) if isinstance(vocab, str) else vocab
  if max_seq_length < 8:
    raise UserError(f"--max_seq_length={max_seq_length} is too small; use 8 or more "
                    "(128 is the usual choice)")
  if num_workers is not None and num_workers < 0:
    raise UserError(f"--num_workers={num_workers} is negative; give a count, or 0 for one "
                    "per core")
  if min_shards < 1:
    raise UserError(f"--min_shards={min_shards} must be 1 or more")
  if not 0.0 <= holdout_fraction < 0.5:
    raise UserError(f"--holdout_fraction={holdout_fraction} is out of range; give a share of "
                    "documents in [0, 0.5), e.g. 0.01")
  pattern = input_files if isinstance(input_files, str) else ",".join(input_files)
  files = io_utils.expand_patterns(input_files)
  _check_inputs(files, pattern)
  _check_output_dir(output_dir, overwrite)
  inputs = input_infos(files)
  total = sum(i.bytes for i in inputs)
  if not num_workers:
    num_workers = max(1, min(os.cpu_count() or 1, total // MIN_BYTES_PER_AUTO_WORKER))
  if any(fileio.scheme(path) == "ram" for path in [*files, vocab.path]):
    num_workers = 1  # ram:// lives in this process's memory: a worker would not see it
  plan = plan_units(files, max(num_workers, min_shards, math.ceil(total / TEXT_BYTES_PER_SHARD)))
  started = time.monotonic()
  with io_utils.staging_dir(output_dir) as staging:
    held_out_dir = os.path.join(staging, HELD_OUT_SUBDIR)  # staging is local (atomic.py)
    if holdout_fraction:
      fileio.makedirs(held_out_dir)
    units = [shard_writer.Unit(i, segments, os.path.join(staging, f"shard-{i:05d}.tfrecord"),
                               vocab.path, vocab.md5, vocab.spec, max_seq_length, seed,
                               holdout_fraction,
                               os.path.join(held_out_dir, f"shard-{i:05d}.tfrecord"))
             for i, segments in enumerate(plan)]
    progress = _Progress(total, show_progress)
    results = sorted(_run_units(units, min(num_workers, len(units)), progress),
                     key=lambda r: r["index"])
    # Worker reports may still be in flight: the final line uses the workers' own counts.
    progress.done = total
    progress.documents = sum(r["documents"] + r["held_out"]["documents"] for r in results)
    progress.show(final=True)
    if not sum(r["examples"] for r in results):
      raise UserError(f"no text in {pattern}: only blank lines or whitespace; give UTF-8 "
                      "text, one sentence per line, a blank line between documents")
    def manifest_of(data_dir: str, paths: list[str], counts: list[dict]) -> Manifest:
      shards = []
      for path, count in zip(paths, counts, strict=True):
        if not count["examples"]:
          fileio.remove(path)  # a unit of blank lines: an empty shard helps no one
          continue
        shards.append(ShardInfo(os.path.basename(path), count["examples"],
                                fileio.getsize(path), tuple(count["offsets"])))
      manifest = Manifest(
          data_dir=data_dir, documents=sum(c["documents"] for c in counts),
          examples=sum(c["examples"] for c in counts),
          tokens=sum(c["tokens"] for c in counts), vocab_md5=vocab.md5,
          vocab_size=vocab.size, vocab_file=vocab.path, tokenizer=vocab.spec.to_dict(),
          max_seq_length=max_seq_length, seed=seed, num_workers=num_workers,
          shards=tuple(shards), inputs=inputs,
          build_seconds=round(time.monotonic() - started, 3),
          index_every=RECORD_INDEX_EVERY)
      manifest.write()
      return manifest

    if holdout_fraction:
      held_out = manifest_of(held_out_dir, [u.holdout_path for u in units],
                             [r["held_out"] for r in results])
      if not held_out.examples:
        raise UserError(f"--holdout_fraction={holdout_fraction} set aside none of the "
                        f"{progress.documents:,} documents; raise it or leave it 0")
    manifest = manifest_of(staging, [u.output_path for u in units], results)
    _check_output_dir(output_dir, overwrite)  # it may have appeared while we worked
    io_utils.replace_dir(staging, output_dir, MANIFEST_NAME)
  return dataclasses.replace(manifest, data_dir=fileio.abspath(output_dir))


def build_if_needed(text_files_pattern: str | list[str], vocab: Vocab | str, output_dir: str,
                    max_seq_length: int, seed: int = 0,
                    num_workers: int | None = None, show_progress: bool = True) -> str:
  """Returns `output_dir`, building it first unless it already holds the same data.

  The data is reused when its manifest lists the same input files (paths, sizes,
  mtimes), vocab md5, max_seq_length and tokenizer settings, and every shard is whole. The
  seed does not invalidate it: data built with another seed is equally good.
  """
  vocab = load_vocab(vocab) if isinstance(vocab, str) else vocab
  files = io_utils.expand_patterns(text_files_pattern, what="--text_files")
  try:
    manifest = read_manifest(output_dir, required=False) if is_data_dir(output_dir) else None
    if manifest is not None and manifest.inputs == input_infos(files):
      check_manifest(manifest, vocab, max_seq_length)
      return output_dir
  except UserError:
    pass  # stale or damaged: rebuild below
  build_pretraining_data(text_files_pattern, vocab, output_dir, max_seq_length,
                         num_workers=num_workers, seed=seed, overwrite=True,
                         show_progress=show_progress)
  return output_dir
