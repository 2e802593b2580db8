"""SavedModel export: tiny models of every task exported, reloaded in a fresh process, and
compared with the Keras models (ids) and with the Python pre/post-processing (raw text);
warmup records replayed; versions; saved_model_cli; bad requests rejected."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from testing_utils import command_env, run_command

from electra_tf.config import EncoderConfig, FinetuneConfig
from electra_tf.data import builtin
from electra_tf.data.tokenizer import WordPieceTokenizer
from electra_tf.data.vocab import builtin_vocab_path
from electra_tf.model.finetune_models import build_finetune_model, model_for_task
from electra_tf.serving import saved_model
from electra_tf.tasks import classification_data, squad_data
from electra_tf.tasks.squad import SquadTask
from electra_tf.training.finetuned import save_finetuned

ENC = EncoderConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
                    embedding_size=16, max_position_embeddings=128)
PAIR = classification_data.TaskSpec("classification", ("a", "b"), "label", ("no", "yes"),
                                    ("accuracy",), "accuracy")
SQUAD_SIZES = dict(max_seq_length=64, doc_stride=24, max_query_length=16)

RELOAD = r"""
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # registers the tf.text ops the text signatures use
from tensorflow_serving.apis import prediction_log_pb2
requests = json.load(open(sys.argv[1]))
out = {}
for name, path in requests["exports"].items():
  loaded = tf.saved_model.load(path)
  for sig, inputs in requests["inputs"][name].items():
    fn = loaded.signatures[sig]
    kwargs = {k: tf.constant(v, tf.int32 if isinstance(v[0], list) else tf.string)
              for k, v in inputs.items()}
    out[f"{name}/{sig}"] = {k: v.numpy().tolist() if v.dtype != tf.string else
                            [s.decode() for s in v.numpy().reshape(-1)]
                            for k, v in fn(**kwargs).items()}
  replayed = 0
  for record in tf.data.TFRecordDataset(path + "/assets.extra/tf_serving_warmup_requests"):
    log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
    request = log.predict_log.request
    fn = loaded.signatures[request.model_spec.signature_name]
    fn(**{k: tf.make_ndarray(v) for k, v in request.inputs.items()})
    replayed += 1
  out[f"{name}/warmup"] = replayed
json.dump(out, open(sys.argv[2], "w"))
"""


def _record(task, config, spec=None, threshold=None):
  record = {"task": task, "encoder": ENC.to_dict(), "finetune": config.to_dict()}
  if spec is not None:
    import dataclasses

    record["spec"] = dataclasses.asdict(spec)
  if threshold is not None:
    record["eval"] = {"best_f1_thresh": threshold}
  return record


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
  """Fine-tuned-format dirs (random weights) for each task, exported once."""
  root = tmp_path_factory.mktemp("serving")
  tf.keras.utils.set_random_seed(0)
  configs = {
      "squad1": ("squad_v1.1", FinetuneConfig(task="squad_v1.1", **SQUAD_SIZES), None, None),
      "squad2": ("squad_v2.0", FinetuneConfig(task="squad_v2.0", joint_end_head=True,
                                              beam_size=5, **SQUAD_SIZES), None, 0.0),
      "pair": ("classification", FinetuneConfig(task="classification", max_seq_length=24),
               PAIR, None),
  }
  made = {}
  for name, (task, config, spec, threshold) in configs.items():
    model = build_finetune_model(model_for_task(config, ENC, 2))
    src = str(root / f"{name}-run")
    save_finetuned(model, _record(task, config, spec, threshold), builtin_vocab_path(), src)
    made[name] = (model, config, saved_model.export(src, None, str(root / name)))
  from electra_tf.checkpoints.native import save_discriminator
  from electra_tf.model.networks import Discriminator, dummy_inputs

  disc = Discriminator(ENC)
  disc(dummy_inputs())
  save_discriminator(disc, builtin_vocab_path(), str(root / "disc"))
  made["rtd"] = (disc, None, saved_model.export(str(root / "disc"), "pretraining",
                                                str(root / "rtd")))
  return made


def _squad_examples():
  examples, _ = squad_data.read_squad(builtin.squad_path("unittest"), is_training=False)
  dev, _ = squad_data.read_squad(builtin.squad_path("dev"), is_training=False)
  examples = examples + dev[:6]
  # Edge cases: an empty context and an accented, CJK context.
  examples.append(squad_data.SquadExample("empty", "Anything?", "", (), -1, True))
  examples.append(squad_data.SquadExample("utf", "Où est le café?",
                                          "Le café (喫茶店) est à Zürich, près du lac.", (), -1,
                                          True))
  return examples


def _python_answers(model, config, examples, tmp_path, threshold=None):
  from electra_tf.tasks import squad_postprocess

  tokenizer = WordPieceTokenizer(builtin_vocab_path())
  task = SquadTask(config, tokenizer, [], examples, None, str(tmp_path / "cache"))
  outputs = {}
  for batch in task.eval_dataset().batch(32):
    for k, v in model.predict_step(batch).items():
      outputs.setdefault(k, []).append(v.numpy())
  preds, nbest, odds = task.predict({k: np.concatenate(v) for k, v in outputs.items()})
  if threshold is not None:
    preds = squad_postprocess.apply_null_threshold(preds, odds, threshold)
  return preds, nbest


def test_reloaded_exports_match_keras_and_python(exports, tmp_path):
  examples = _squad_examples()
  tokenizer = WordPieceTokenizer(builtin_vocab_path())
  pairs = [classification_data.Example(("A fine film, really.", "Was it good?"), 1),
           classification_data.Example(("x " * 40, ""), 0),  # truncated; empty second text
           classification_data.Example(("Zürich", "东京 and emoji 🙂"), 0)]
  encoded = classification_data.encode(pairs, tokenizer, 24, PAIR)
  ids = {k: encoded[k].tolist() for k in ("input_ids", "input_mask", "segment_ids")}
  squad_ids = {k: v[:, :40].tolist() for k, v in ids_for_squad(tokenizer).items()}
  questions = {"question": [e.question for e in examples],
               "context": [e.context for e in examples]}
  request = {
      "exports": {name: path for name, (_, _, path) in exports.items()},
      "inputs": {"squad1": {"serving_default": squad_ids, "answer": questions},
                 "squad2": {"serving_default": squad_ids, "answer": questions},
                 "pair": {"serving_default": ids, "classify_text_pair": {
                     "text_a": [p.texts[0] for p in pairs], "text_b": [p.texts[1] for p in pairs]},
                     "classify_text": {"text": SHORT}},
                 "rtd": {"serving_default": ids, "detect_text": {"text": ["a b c", ""]}}}}
  (tmp_path / "req.json").write_text(json.dumps(request))
  result = subprocess.run([sys.executable, "-c", RELOAD, str(tmp_path / "req.json"),
                           str(tmp_path / "out.json")], capture_output=True, text=True,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  out = json.load(open(tmp_path / "out.json"))

  # Token ids: the same numbers as the Keras models.
  for name, inputs in (("squad1", squad_ids), ("squad2", squad_ids), ("pair", ids)):
    keras_out = exports[name][0]({k: tf.constant(v) for k, v in inputs.items()}, training=False)
    served = out[f"{name}/serving_default"]
    for key in ("start_logits", "end_logits", "logits", "probabilities"):
      if key in served and key in keras_out:
        diff = np.abs(np.array(served[key]) - keras_out[key].numpy()).max()
        assert diff < 1e-5, (name, key, diff)
  disc = exports["rtd"][0]
  probs = tf.sigmoid(disc({k: tf.constant(v) for k, v in ids.items()})).numpy()
  assert np.abs(np.array(out["rtd/serving_default"]["replaced_probability"]) - probs).max() < 1e-5
  text = out["rtd/detect_text"]  # raw text: the ids it built, scored like the Keras model
  built = {k: tf.constant(text[k]) for k in ("input_ids", "input_mask", "segment_ids")}
  assert text["input_ids"][1][:2] == [101, 102]  # "" -> [CLS] [SEP]
  assert len(text["input_ids"][0]) == 5  # padded to the batch's longest, [CLS] a b c [SEP]
  np.testing.assert_allclose(text["replaced_probability"], tf.sigmoid(disc(built)).numpy(),
                             atol=1e-5)

  # Raw text: the pair classifier equals the model on classification_data.encode's inputs.
  keras_pair = exports["pair"][0]({k: tf.constant(v) for k, v in ids.items()}, training=False)
  np.testing.assert_allclose(out["pair/classify_text_pair"]["probabilities"],
                             keras_pair["probabilities"].numpy(), atol=1e-5)
  assert out["pair/classify_text_pair"]["labels"] == [
      ("no", "yes")[i] for i in keras_pair["probabilities"].numpy().argmax(-1)]
  # Sentences of mixed lengths, served padded to the longest of the batch: the Keras model's
  # numbers on the same sentences padded to max_seq_length.
  np.testing.assert_allclose(out["pair/classify_text"]["probabilities"],
                             _keras_short(exports["pair"][0], tokenizer), atol=1e-5)

  # Raw text SQuAD: the same answers and offsets as finetune.py's Python path.
  for name, threshold in (("squad1", None), ("squad2", 0.0)):
    model, config = exports[name][0], exports[name][1]
    preds, nbest = _python_answers(model, config, examples, tmp_path / name, threshold)
    served = out[f"{name}/answer"]
    assert served["answer"] == [preds[e.qas_id] for e in examples], name
    for i, e in enumerate(examples):
      if served["answer"][i] and threshold is None:
        assert served["start"][i] == nbest[e.qas_id][0]["char_start"]
        assert e.context[served["start"][i]:served["end"][i]] == served["answer"][i]
  assert served["answer"][examples.index(examples[-2])] == ""  # empty context

  for name in exports:
    assert out[f"{name}/warmup"] >= 2  # every warmup request replays


SHORT = ["Good.", "A warm, funny and moving film about two old friends.", "", "Dull!"]


def _keras_short(model, tokenizer):
  """The pair classifier's probabilities on SHORT as finetune.py encodes them (24 tokens)."""
  single = classification_data.TaskSpec("classification", ("a",), "label", ("no", "yes"),
                                        ("accuracy",), "accuracy")
  enc = classification_data.encode([classification_data.Example((t,), 0) for t in SHORT],
                                   tokenizer, 24, single)
  return model({k: tf.constant(enc[k]) for k in ("input_ids", "input_mask", "segment_ids")},
               training=False)["probabilities"].numpy()


def ids_for_squad(tokenizer):
  enc = classification_data.encode(
      [classification_data.Example(("Who?", "Paris is in France."), 0)] * 2, tokenizer, 64,
      PAIR)
  return {k: enc[k] for k in ("input_ids", "input_mask", "segment_ids")}


def test_versions_cli_and_bad_requests(exports, tmp_path):
  pair_path = exports["pair"][2]
  base = os.path.dirname(pair_path)
  assert os.path.basename(pair_path) == "1"
  os.makedirs(os.path.join(base, ".tmp-stale"))  # a crashed export is not a version
  src = os.path.join(os.path.dirname(base), "pair-run")
  env = command_env()
  bad = run_command("export", f"--checkpoint={src}", f"--export_dir={base}",
                    "--length_buckets=16,x")
  assert bad.returncode == 2 and "comma-separated integers" in bad.stderr, bad.stderr
  result = run_command("export", f"--checkpoint={src}", f"--export_dir={base}",
                       "--length_buckets=8,16", "--serving_dtype=bfloat16", "--jit_compile")
  assert result.returncode == 0, result.stderr[-3000:]
  assert os.path.isdir(os.path.join(base, "2")) and os.path.isdir(pair_path)
  # Version 2 multiplies in bfloat16, XLA-compiled, with 8/16/24-token buckets: near the
  # float32 model after a reload.
  served = tf.saved_model.load(os.path.join(base, "2")).signatures["classify_text"](
      text=tf.constant(SHORT))["probabilities"].numpy()
  want = _keras_short(exports["pair"][0], WordPieceTokenizer(builtin_vocab_path()))
  np.testing.assert_allclose(served, want, atol=2e-2)
  assert np.abs(served - want).max() > 0  # it did round to bfloat16
  show = subprocess.run([os.path.join(os.path.dirname(sys.executable), "saved_model_cli"),
                         "show", "--all", "--dir", pair_path], capture_output=True, text=True,
                        env=env, timeout=300)
  assert show.returncode == 0, show.stderr[-2000:]
  for needle in ("signature_def['serving_default']", "signature_def['classify_text_pair']",
                 "input_ids", "probabilities"):
    assert needle in show.stdout
  run = run_command("saved_model_cli", "run", "--dir", pair_path, "--tag_set", "serve",
                    "--signature_def", "classify_text", "--input_exprs",
                    "text=['good film', '']", timeout=300)
  assert run.returncode == 0 and "probabilities" in run.stdout, run.stderr[-2000:]
  bad = run_command("export", f"--checkpoint={src}", f"--export_dir={base}",
                    "--task=squad_v1.1")
  assert bad.returncode == 2 and "fine-tuned for classification" in bad.stderr, bad.stderr
  assert sorted(d for d in os.listdir(base) if not d.startswith(".")) == ["1", "2"]

  loaded = tf.saved_model.load(pair_path)
  fn = loaded.signatures["serving_default"]
  refused = (TypeError, ValueError, tf.errors.InvalidArgumentError)
  with pytest.raises(refused):  # wrong dtype: refused by the signature
    fn(input_ids=tf.zeros([1, 4], tf.int64), input_mask=tf.ones([1, 4], tf.int64),
       segment_ids=tf.zeros([1, 4], tf.int64))
  with pytest.raises(refused):  # wrong rank
    fn(input_ids=tf.zeros([4], tf.int32), input_mask=tf.ones([4], tf.int32),
       segment_ids=tf.zeros([4], tf.int32))
  with pytest.raises(tf.errors.InvalidArgumentError, match="longer than"):
    fn(input_ids=tf.zeros([1, 200], tf.int32), input_mask=tf.ones([1, 200], tf.int32),
       segment_ids=tf.zeros([1, 200], tf.int32))
