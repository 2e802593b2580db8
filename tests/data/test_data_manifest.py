"""Manifest checks before training, and build_if_needed's cache."""

import dataclasses
import json
import os
import re
import shutil

import pytest

from electra_tf.data.manifest import check_manifest, read_manifest
from electra_tf.data.pretraining_data import build_if_needed, build_pretraining_data
from electra_tf.data.tokenizer_spec import TokenizerSpec
from electra_tf.errors import UserError
from electra_tf.filenames import MANIFEST_NAME


@pytest.fixture(scope="module")
def built(tmp_path_factory, toy_corpus, toy_vocab):
  out = str(tmp_path_factory.mktemp("manifest") / "data")
  build_pretraining_data(toy_corpus, toy_vocab, out, max_seq_length=32, num_workers=1,
                         min_shards=2, show_progress=False)
  return out


@pytest.fixture
def copy(built, tmp_path):
  target = str(tmp_path / "copy")
  shutil.copytree(built, target)
  return target


def test_matching_data_passes(built, toy_vocab):
  manifest = read_manifest(built)
  check_manifest(manifest, toy_vocab, 32)
  # A glob of the shards and the manifest path itself find the same manifest.
  assert read_manifest(os.path.join(built, "*.tfrecord")) == manifest
  assert read_manifest(os.path.join(built, MANIFEST_NAME)) == manifest


def test_other_vocab(built, bert_vocab, toy_vocab):
  with pytest.raises(UserError, match=re.escape(
      f"data in {built} was built with another vocab (md5 {toy_vocab.md5}")) as error:
    check_manifest(read_manifest(built), bert_vocab, 32)
  assert str(error.value).endswith(
      f"rebuild it with --vocab_file={bert_vocab.path} or pass the vocab it was built with")


def test_other_max_seq_length(built, toy_vocab):
  with pytest.raises(UserError, match=re.escape(
      f"data in {built} holds sequences of length 32 but max_seq_length is 128; rebuild it "
      "with --max_seq_length=128 or train with --max_seq_length=32")):
    check_manifest(read_manifest(built), toy_vocab, 128)


def test_other_tokenizer_settings(built, toy_vocab):
  cased = dataclasses.replace(toy_vocab, spec=TokenizerSpec.create(lower_case=False))
  with pytest.raises(UserError, match=re.escape(
      f"data in {built} tokenizes with (wordpiece, lower_case=True, strip_accents=True, "
      f"split_cjk=True) but the vocab {toy_vocab.path} with (wordpiece, lower_case=False, "
      "strip_accents=False, split_cjk=True)")):
    check_manifest(read_manifest(built), cased, 32)


def test_data_built_before_specs_is_read_from_its_lower_case(copy, toy_vocab, capsys):
  path = os.path.join(copy, MANIFEST_NAME)
  values = json.load(open(path))
  del values["tokenizer"]
  values["lower_case"] = False
  with open(path, "w") as f:
    json.dump(values, f)
  manifest = read_manifest(copy)
  assert manifest.spec() == TokenizerSpec.create(lower_case=False)
  with pytest.raises(UserError, match="lower_case=False"):
    check_manifest(manifest, toy_vocab, 32)
  assert "records no tokenizer settings: taken as (wordpiece, lower_case=False" in \
      capsys.readouterr().err


def test_truncated_shard(copy, toy_vocab):
  manifest = read_manifest(copy)
  path = manifest.shard_paths[1]
  with open(path, "r+b") as f:
    f.truncate(manifest.shards[1].bytes - 10)
  with pytest.raises(UserError, match=re.escape(
      f"shard {path} has {manifest.shards[1].bytes - 10} bytes but the manifest says "
      f"{manifest.shards[1].bytes}: truncated or corrupt; rebuild the data")):
    check_manifest(manifest, toy_vocab, 32)


def test_missing_shard(copy, toy_vocab):
  manifest = read_manifest(copy)
  os.remove(manifest.shard_paths[0])
  with pytest.raises(UserError, match="listed in the manifest is missing"):
    check_manifest(manifest, toy_vocab, 32)


def test_missing_or_damaged_manifest(copy):
  path = os.path.join(copy, MANIFEST_NAME)
  with open(path, "w") as f:
    f.write("{not json")
  with pytest.raises(UserError, match="is not valid JSON"):
    read_manifest(copy)
  os.remove(path)
  with pytest.raises(UserError, match=f"no {MANIFEST_NAME} in {re.escape(copy)}; "
                     "build the data with"):
    read_manifest(copy)
  assert read_manifest(copy, required=False) is None


def test_build_if_needed_reuses_matching_data(tmp_path, toy_corpus, toy_vocab):
  shutil.copytree(os.path.dirname(toy_corpus), tmp_path / "corpus")  # we touch its files
  toy_corpus = str(tmp_path / "corpus" / "*.txt")
  out = str(tmp_path / "cache")
  manifest_file = os.path.join(out, MANIFEST_NAME)
  assert build_if_needed(toy_corpus, toy_vocab, out, 32, 0, show_progress=False) == out
  built_at = os.stat(manifest_file).st_mtime_ns
  build_if_needed(toy_corpus, toy_vocab, out, 32, seed=5, show_progress=False)
  assert os.stat(manifest_file).st_mtime_ns == built_at  # reused (the seed is no reason)

  build_if_needed(toy_corpus, toy_vocab, out, 16, show_progress=False)
  assert read_manifest(out).max_seq_length == 16  # another length: rebuilt

  first_input = read_manifest(out).inputs[0].path
  os.utime(first_input, ns=(built_at, built_at + 10**9))  # an input changed
  build_if_needed(toy_corpus, toy_vocab, out, 16, show_progress=False)
  assert read_manifest(out).inputs[0].mtime == os.path.getmtime(first_input)
