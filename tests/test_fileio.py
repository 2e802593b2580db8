"""electra_tf.fileio and electra_tf.atomic on local disk and on ram://, which behave alike."""

import os
import uuid

import pytest
from testing_utils import assert_clear_error, run_command

from electra_tf import atomic, fileio
from electra_tf.errors import UserError


@pytest.fixture(params=["local", "ram"])
def root(request, tmp_path):
  if request.param == "local":
    return str(tmp_path / "root")
  return f"ram://fileio{uuid.uuid4().hex[:8]}/root"


def test_every_function_behaves_alike_on_local_disk_and_ram(root):
  assert not fileio.exists(root) and not fileio.isdir(root)
  fileio.makedirs(fileio.join(root, "sub", "deeper"))
  fileio.makedirs(fileio.join(root, "sub"))  # an existing directory is fine
  assert fileio.isdir(fileio.join(root, "sub")) and not fileio.isfile(fileio.join(root, "sub"))
  text_path, bytes_path = fileio.join(root, "a.txt"), fileio.join(root, "sub", "b.bin")
  fileio.write_text(text_path, "héllo\n")
  with fileio.open(bytes_path, "wb") as f:
    f.write(b"\x00\x01\x02")
  assert fileio.read_text(text_path) == "héllo\n"
  assert fileio.read_bytes(bytes_path) == b"\x00\x01\x02"
  assert fileio.getsize(text_path) == len("héllo\n".encode())
  assert fileio.getmtime(text_path) >= 0  # ram:// keeps none: 0
  assert fileio.isfile(text_path) and not fileio.isdir(text_path)
  assert fileio.listdir(root) == ["a.txt", "sub"]
  assert fileio.glob(fileio.join(root, "*.txt")) == [text_path]
  assert [(fileio.basename(d), sorted(ds), sorted(fs)) for d, ds, fs in fileio.walk(root)] == [
      ("root", ["sub"], ["a.txt"]), ("sub", ["deeper"], ["b.bin"]), ("deeper", [], [])]
  assert fileio.dirname(text_path) == root and fileio.basename(text_path) == "a.txt"

  copy = fileio.join(root, "c.txt")
  fileio.copy(text_path, copy)
  assert fileio.read_text(copy) == "héllo\n"
  with pytest.raises(Exception):  # noqa: B017 - FileExistsError locally, TF's error on ram://
    fileio.rename(copy, text_path)
  fileio.write_text(copy, "new")
  fileio.rename(copy, text_path, overwrite=True)
  assert fileio.read_text(text_path) == "new" and not fileio.exists(copy)
  fileio.remove(text_path)
  assert fileio.listdir(root) == ["sub"]
  fileio.rmtree(fileio.join(root, "sub"))
  fileio.rmtree(fileio.join(root, "missing"))  # nothing to remove is fine
  assert fileio.listdir(root) == [] and not fileio.exists(fileio.join(root, "sub", "b.bin"))


def test_ram_names_that_share_a_prefix_stay_apart():
  """ram:// lists ram://x/ab's pieces under ram://x/a and says ram://x/a exists; fileio not."""
  base = f"ram://prefix{uuid.uuid4().hex[:8]}"
  fileio.makedirs(f"{base}/pp")
  fileio.makedirs(f"{base}/ppq")
  fileio.write_text(f"{base}/pp/x", "x")
  fileio.write_text(f"{base}/ppq/y", "y")
  assert fileio.listdir(f"{base}/pp") == ["x"]
  assert not fileio.exists(f"{base}/p") and not fileio.isdir(f"{base}/p")
  assert [d for d, _, _ in fileio.walk(f"{base}/pp")] == [f"{base}/pp"]
  fileio.rmtree(f"{base}/pp")
  assert not fileio.exists(f"{base}/pp") and fileio.read_text(f"{base}/ppq/y") == "y"


def test_paths_keep_their_scheme():
  assert fileio.abspath("ram://run/") == "ram://run"
  assert fileio.abspath("gs://bucket/run") == "gs://bucket/run"
  assert fileio.abspath("run") == os.path.join(os.getcwd(), "run")
  assert fileio.dirname("gs://bucket/run") == "gs://bucket"
  assert fileio.dirname("ram://run") == "ram://" and fileio.dirname("ram://") == "ram://"
  assert fileio.basename("gs://bucket/run/") == "run" and fileio.abspath("gs://") == "gs://"
  assert fileio.exists("ram://")
  assert fileio.join("gs://bucket", "a", "b") == "gs://bucket/a/b"
  assert fileio.scheme("GS://b") == "gs" and fileio.scheme("/tmp/x") is None


def test_an_unregistered_scheme_is_one_line_naming_what_to_install(monkeypatch):
  fileio.check_path("ram://x")
  fileio.check_path("/local/path")
  with pytest.raises(UserError) as info:
    fileio.check_path("nosuch://bucket/run", "--model_dir")
  message = str(info.value)
  assert "\n" not in message
  assert message.startswith("--model_dir nosuch://bucket/run: TensorFlow has no file system "
                            "for nosuch://; give a local path or one on ")
  assert "ram://" in message
  # gs:// without tensorflow-io-gcs-filesystem (optional since TF 2.20): the extra to install.
  monkeypatch.setattr(fileio, "_registered", lambda name: name != "gs")
  monkeypatch.setitem(fileio._PROVIDERS, "gs", ("electra_tf_no_such_module",
                                                fileio._GCS[1]))
  with pytest.raises(UserError, match=r"gs://b/run: TensorFlow has no file system for gs://; "
                                      r"install it with pip install 'electra_tf\[gcs\]'"):
    fileio.check_path("gs://b/run")


def test_pretrain_refuses_an_unregistered_scheme_before_any_work(tmp_path):
  result = run_command("pretrain", "--model_dir=nosuch://bucket/run", "--num_train_steps=1",
                       cwd=str(tmp_path))
  assert_clear_error(result, "--model_dir nosuch://bucket/run",
                     "TensorFlow has no file system for nosuch://")
  assert os.listdir(tmp_path) == []


def test_atomic_text_write_leaves_only_the_file(root):
  path = fileio.join(root, "dir", "record.json")
  atomic.atomic_write_text(path, "one")
  atomic.atomic_write_text(path, "two")
  assert fileio.read_text(path) == "two"
  assert fileio.listdir(fileio.join(root, "dir")) == ["record.json"]


def test_a_failed_directory_write_leaves_nothing_and_keeps_the_old_one(root):
  final = fileio.join(root, "export")

  def write(tmp, text="old"):
    fileio.write_text(os.path.join(tmp, "weights"), text)
    fileio.write_text(os.path.join(tmp, "config.json"), text)

  def fail(tmp):
    write(tmp, "new")
    raise RuntimeError("disk full")

  with pytest.raises(RuntimeError):
    atomic.write_dir(final, fail, "config.json")
  assert not fileio.exists(final)
  atomic.write_dir(final, write, "config.json")
  with pytest.raises(RuntimeError):
    atomic.write_dir(final, fail, "config.json")
  assert fileio.read_text(fileio.join(final, "config.json")) == "old"
  assert fileio.listdir(root) == ["export"]  # no staging dir left beside it


def test_a_remote_directory_is_copied_with_its_markers_last(monkeypatch):
  final = f"ram://marker{uuid.uuid4().hex[:8]}/data"
  copied = []
  copy = fileio.copy
  monkeypatch.setattr(fileio, "copy", lambda s, t: (copied.append(t[len(final) + 1:]),
                                                    copy(s, t)))

  def write(tmp):
    os.makedirs(os.path.join(tmp, "held_out"))
    for name in ("manifest.json", "shard-1", "held_out/manifest.json", "held_out/shard-1",
                 "z-shard"):
      fileio.write_text(os.path.join(tmp, name), name)

  atomic.write_dir(final, write, "manifest.json")
  assert copied[-2:] == ["held_out/manifest.json", "manifest.json"]
  assert sorted(copied) == sorted(["manifest.json", "shard-1", "held_out/manifest.json",
                                   "held_out/shard-1", "z-shard"])
  # Replacing it removes the old marker before anything else: never old marker, new files.
  removed = []
  remove = fileio.remove
  monkeypatch.setattr(fileio, "remove", lambda p: (removed.append(p), remove(p)))
  copied.clear()
  atomic.write_dir(final, lambda tmp: fileio.write_text(os.path.join(tmp, "manifest.json"), "2"),
                   "manifest.json")
  assert removed[:2] == [f"{final}/manifest.json", f"{final}/held_out/manifest.json"]
  assert fileio.listdir(final) == ["manifest.json"] and copied == ["manifest.json"]


def test_an_interrupted_copy_leaves_a_directory_without_its_marker(monkeypatch):
  final = f"ram://broken{uuid.uuid4().hex[:8]}/export"
  copy = fileio.copy

  def copy_then_fail(source, target):
    if target.endswith("config.json"):
      raise OSError("connection lost")
    copy(source, target)

  monkeypatch.setattr(fileio, "copy", copy_then_fail)

  def write(tmp):
    fileio.write_text(os.path.join(tmp, "ckpt.index"), "x")
    fileio.write_text(os.path.join(tmp, "config.json"), "{}")

  with pytest.raises(OSError):
    atomic.write_dir(final, write, "config.json")
  assert fileio.listdir(final) == ["ckpt.index"]  # readers look for config.json: unfinished
