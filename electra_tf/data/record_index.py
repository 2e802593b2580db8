"""Blocks of consecutive records in the shards, found by byte offset and read by seeking.

A TFRecord is framed as an 8-byte length, its 4-byte CRC, the data and the data's 4-byte
CRC, so the offset of every K-th record is known from the lengths alone. The data builder
writes these offsets into the manifest (`ShardInfo.offsets`). For data built before that,
or files without a manifest, they are found by reading every shard's record headers,
whole, each time an input pipeline builds its stream (it prints a note): rebuilding the
data adds the index.
"""

from __future__ import annotations

import dataclasses
import struct
import sys
import time
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from electra_tf import fileio
from electra_tf.data.manifest import _REBUILD, RECORD_INDEX_EVERY, read_manifest
from electra_tf.errors import UserError

_HEADER = 12  # length (uint64, little-endian) and its CRC
_FRAMING = 16  # the header and the data's CRC
_SCAN_CHUNK = 4 << 20
_MAX_READ_BUFFER = 4 << 20


def scan_offsets(path: str, every: int) -> tuple[int, list[int]]:
  """(records, byte offsets of records 0, every, 2 * every, ...) of the TFRecord file `path`.

  Reads the file in large chunks and only decodes the record lengths.

  Raises:
    UserError: the framing does not add up to the file's size (not a TFRecord file, or
      truncated).
  """
  size = tf.io.gfile.stat(path).length
  offsets, records, position = [], 0, 0
  chunk, chunk_start = b"", 0
  with tf.io.gfile.GFile(path, "rb") as f:
    while position < size:
      at = position - chunk_start
      if at + _HEADER > len(chunk):
        f.seek(position)
        chunk, chunk_start, at = f.read(_SCAN_CHUNK), position, 0
        if len(chunk) < _HEADER:
          break
      if records % every == 0:
        offsets.append(position)
      records += 1
      position += struct.unpack_from("<Q", chunk, at)[0] + _FRAMING
  if position != size:
    raise UserError(f"{path} is not a TFRecord file, or is truncated or corrupt (its record "
                    f"lengths add up to {position} bytes, the file has {size}); rebuild the "
                    f"data with {_REBUILD}")
  return records, offsets


@dataclasses.dataclass(frozen=True)
class Blocks:
  """Blocks of at most `size` consecutive records, in file order.

  Block i holds `records[i]` records of files[file[i]], `bytes[i]` bytes from offset[i].
  """

  files: tuple[str, ...]
  file: np.ndarray  # int64 [N]
  offset: np.ndarray  # int64 [N]
  records: np.ndarray  # int64 [N]
  bytes: np.ndarray  # int64 [N]
  size: int

  def take(self, indices: Sequence[int] | slice) -> Blocks:
    return dataclasses.replace(self, file=self.file[indices], offset=self.offset[indices],
                               records=self.records[indices], bytes=self.bytes[indices])


def _indexed(path: str, manifests: dict, size: int) -> tuple[int, list[int], int] | None:
  """(records, offsets every `size` records, file bytes) from the manifest beside `path`, if
  it has them."""
  directory = fileio.dirname(path)
  if directory not in manifests:
    manifest = read_manifest(directory, required=False)
    usable = manifest is not None and manifest.index_every and size % manifest.index_every == 0
    manifests[directory] = ({s.file: (s.records, list(s.offsets[::size // manifest.index_every]),
                                      s.bytes) for s in manifest.shards} if usable else {})
  return manifests[directory].get(fileio.basename(path))


def blocks_of(files: Sequence[str], size: int = RECORD_INDEX_EVERY, stream=None) -> Blocks:
  """The blocks of `size` records of `files` (a multiple of the manifest's `index_every` uses
  the manifest's index; other sizes, and files without an index, are scanned)."""
  manifests: dict = {}
  file, offset, records, ends, scanned, began = [], [], [], [], [], time.monotonic()
  for i, path in enumerate(files):
    found = _indexed(path, manifests, size)
    if found is None:
      found = (*scan_offsets(path, size), tf.io.gfile.stat(path).length)
      scanned.append(path)
    count, starts, file_bytes = found
    for j, start in enumerate(starts):
      file.append(i)
      offset.append(start)
      records.append(min(size, count - j * size))
      ends.append(starts[j + 1] if j + 1 < len(starts) else file_bytes)
  if scanned:
    print(f"note: {len(scanned)} data file(s) ({scanned[0]}, ...) have no record index (for "
          f"blocks of {size}) in a manifest; scanned their record headers in "
          f"{time.monotonic() - began:.1f} s; data built with {_REBUILD} now has one",
          file=stream or sys.stderr)
  as_array = lambda values: np.array(values, np.int64)  # noqa: E731
  offset = as_array(offset)
  return Blocks(tuple(files), as_array(file), offset, as_array(records),
                as_array(ends) - offset, size)


def read_block(path: tf.Tensor, offset: tf.Tensor, records: tf.Tensor,
               size_bytes: tf.Tensor) -> tf.data.Dataset:
  """The `records` serialized records of `path` that fill `size_bytes` bytes from byte
  `offset`, found by seeking; the read buffer is the block's size (up to 4 MB), so little
  beyond the block is read.

  tf.data.TFRecordDataset has no start offset; the op under it (TFRecordDatasetV2) does,
  and seeks to it without reading what comes before. Call it inside a tf.data function
  (interleave, flat_map): TF 2.20 cannot serialize such a dataset built eagerly (its graph
  def drops the offsets).
  """
  variant = tf.raw_ops.TFRecordDatasetV2(
      filenames=path, compression_type="",
      buffer_size=tf.clip_by_value(tf.cast(size_bytes, tf.int64), 1, _MAX_READ_BUFFER),
      byte_offsets=tf.cast(offset, tf.int64))
  return tf.data.experimental.from_variant(
      variant, tf.TensorSpec([], tf.string)).take(tf.cast(records, tf.int64))
