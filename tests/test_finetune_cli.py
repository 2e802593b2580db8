"""finetune.py end to end as a user runs it: a tiny checkpoint from pretrain.py fine-tuned on
real SQuAD v1.1 questions, SQuAD 2.0 (the real 2-question sample plus synthetic unanswerable
questions) and a sentence-classification TSV; and its one-line errors."""

import json

import pytest
from testing_utils import assert_clear_error, run_command


def run(script, *args, timeout=600):
  return run_command(script.removesuffix(".py"), *args, timeout=timeout)


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
  """pretrain.py's discriminator export after a few steps of the tiny preset on real text."""
  from electra_tf.data import builtin, pretraining_data, vocab

  root = tmp_path_factory.mktemp("pretrained")
  corpus = builtin.builtin_corpus(str(root / "cache"), max_articles=2)
  data = str(root / "data")
  pretraining_data.build_pretraining_data(corpus, vocab.builtin_vocab_path(), data,
                                          max_seq_length=64, num_workers=1, show_progress=False)
  result = run("pretrain.py", f"--model_dir={root}/run", f"--train_data={data}",
               "--num_train_steps=4", "--steps_per_execution=2", "--log_steps=2",
               "--checkpoint_steps=4")
  assert result.returncode == 0, result.stderr[-3000:]
  return str(root / "run" / "discriminator")


FAST = ["--max_seq_length=96", "--doc_stride=48", "--max_query_length=24", "--batch_size=8",
        "--eval_batch_size=16", "--log_steps=5", "--learning_rate=3e-4"]


def test_squad_v1_end_to_end(tmp_path, tiny_checkpoint):
  from electra_tf.data import builtin

  out = tmp_path / "squad"
  result = run("finetune.py", "--task=squad_v1.1", f"--init_checkpoint={tiny_checkpoint}",
               f"--train_file={builtin.squad_path('train')}",
               f"--predict_file={builtin.squad_path('dev')}", "--max_train_examples=48",
               "--max_eval_examples=12", "--num_train_epochs=2", f"--output_dir={out}",
               f"--export_dir={tmp_path}/serving", *FAST)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "restored the encoder" in result.stdout
  assert "eval epoch 2" in result.stdout, result.stdout
  results = json.load(open(out / "eval_results.json"))
  assert len(results["epochs"]) == 2
  for key in ("exact_match", "f1"):
    assert 0.0 <= results["best"][key] <= 100.0
  predictions = json.load(open(out / "predictions.json"))
  dev = json.load(open(builtin.squad_path("dev")))
  first_ids = [qa["id"] for article in dev["data"] for p in article["paragraphs"]
               for qa in p["qas"]][:12]
  assert sorted(predictions) == sorted(first_ids)
  contexts = {qa["id"]: p["context"] for article in dev["data"] for p in article["paragraphs"]
              for qa in p["qas"]}
  # Answers are spans of the original context, not detokenized word pieces.
  assert all(text in contexts[qid] for qid, text in predictions.items())
  assert (out / "best" / "ckpt.index").exists() and (out / "best" / "vocab.txt").exists()
  # The exported text signature answers exactly as finetune.py's predictions.json.
  import tensorflow as tf
  import tensorflow_text  # noqa: F401

  questions = {qa["id"]: (qa["question"], p["context"]) for article in dev["data"]
               for p in article["paragraphs"] for qa in p["qas"]}
  answer = tf.saved_model.load(str(tmp_path / "serving" / "1")).signatures["answer"]
  served = answer(question=tf.constant([questions[q][0] for q in first_ids]),
                  context=tf.constant([questions[q][1] for q in first_ids]))["answer"]
  assert [a.decode() for a in served.numpy()] == [predictions[q] for q in first_ids]
  # Rerunning the finished run resumes nothing and keeps the results.
  again = run("finetune.py", "--task=squad_v1.1", f"--init_checkpoint={tiny_checkpoint}",
              "--max_train_examples=48", "--max_eval_examples=12", "--num_train_epochs=2",
              f"--output_dir={out}", *FAST)
  assert again.returncode == 0, again.stderr[-3000:]
  assert "nothing to do" in again.stdout
  # Another model size in the same output_dir is refused with the difference named.
  other = run("finetune.py", "--task=squad_v1.1", "--model_size=small", f"--output_dir={out}",
              *FAST)
  assert_clear_error(other, "other settings", "encoder.")


def _v2_files(tmp_path):
  """Train/dev SQuAD 2.0 files: real 1.1 questions, half moved to another paragraph of their
  article (unanswerable), plus the real 2-question SQuAD 2.0 sample."""
  from electra_tf.data import builtin
  from electra_tf.tasks import squad_data

  sample, _ = squad_data.read_squad(builtin.squad_v2_sample_path(), is_training=False)
  assert [e.is_impossible for e in sample] == [False, True]
  train, _ = squad_data.read_squad(builtin.squad_path("train"), is_training=True)
  dev, _ = squad_data.read_squad(builtin.squad_path("dev"), is_training=False)
  train_v2 = squad_data.make_unanswerable(train[:40], fraction=0.5, seed=0) + sample
  dev_v2 = squad_data.make_unanswerable(dev[:10], fraction=0.5, seed=1) + sample
  paths = []
  for name, examples in (("train", train_v2), ("dev", dev_v2)):
    path = tmp_path / f"{name}-v2.0.json"
    path.write_text(json.dumps(squad_data.to_squad_json(examples)))
    paths.append(str(path))
  return paths, dev_v2


def test_squad_v2_end_to_end_with_the_joint_head(tmp_path, tiny_checkpoint):
  (train, dev), dev_examples = _v2_files(tmp_path)
  out = tmp_path / "squad2"
  result = run("finetune.py", "--task=squad_v2.0", f"--init_checkpoint={tiny_checkpoint}",
               f"--train_file={train}", f"--predict_file={dev}", "--num_train_epochs=1",
               "--joint_end_head", "--beam_size=4", f"--output_dir={out}", *FAST)
  assert result.returncode == 0, result.stderr[-3000:]
  best = json.load(open(out / "eval_results.json"))["best"]
  for key in ("exact", "f1", "best_exact", "best_f1", "best_f1_thresh", "HasAns_exact",
              "NoAns_exact"):
    assert key in best, best
  odds = json.load(open(out / "null_odds.json"))
  predictions = json.load(open(out / "predictions.json"))
  assert sorted(odds) == sorted(predictions) == sorted(e.qas_id for e in dev_examples)
  # predictions.json applies the threshold chosen on this dev set.
  for qid, text in predictions.items():
    if odds[qid] > best["best_f1_thresh"]:
      assert text == ""
  record = json.load(open(out / "best" / "finetune.json"))
  assert record["finetune"]["joint_end_head"] and record["task"] == "squad_v2.0"


def test_classification_tsv_end_to_end_on_two_replicas(tmp_path, tiny_checkpoint):
  from electra_tf.tasks.classification_data import movie_reviews

  _, train, dev = movie_reviews(seed=0)
  for name, examples in (("train", train[:64]), ("dev", dev[:32])):
    rows = ["review\tsentiment"] + [
        f"{e.texts[0]}\t{'good' if e.label else 'bad'}" for e in examples]
    (tmp_path / f"{name}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
  out = tmp_path / "cls"
  common = ["--task=classification", f"--init_checkpoint={tiny_checkpoint}",
            f"--train_file={tmp_path}/train.tsv", f"--dev_file={tmp_path}/dev.tsv",
            "--text_columns=review", "--label_column=sentiment", "--max_seq_length=48",
            "--batch_size=8", "--num_train_epochs=1", "--log_steps=4", f"--output_dir={out}"]
  result = run("finetune.py", *common, "--strategy=mirrored", "--cpu_devices=2",
               "--pooling=mean")
  assert result.returncode == 0, result.stderr[-3000:]
  assert "2 replica(s)" in result.stdout
  best = json.load(open(out / "eval_results.json"))["best"]
  assert set(best) >= {"accuracy", "f1", "epoch"}
  lines = (out / "dev_predictions.jsonl").read_text().splitlines()
  assert len(lines) == 32 and json.loads(lines[0])["prediction"] in ("bad", "good")
  assert json.load(open(out / "best" / "finetune.json"))["finetune"]["pooling"] == "mean"
  # A label column that does not exist: one line naming the columns there are.
  bad = run("finetune.py", *common[:-1], "--label_column=stars", f"--output_dir={tmp_path}/x")
  assert_clear_error(bad, "no column 'stars'", "review")


@pytest.mark.parametrize("args,needles", [
    ([], ["--task is required"]),
    (["--task=squad_v1.1"], ["--output_dir is required"]),
    (["--task=squad_v2.0", "--output_dir=OUT"], ["needs --train_file and --predict_file"]),
    (["--task=classification", "--output_dir=OUT"], ["needs --train_file and --text_columns"]),
    (["--task=squad_v1.1", "--output_dir=OUT", "--max_seq_length=60"], ["no room"]),
    (["--task=movie_reviews", "--output_dir=OUT", "--pooling=max"], ["unknown pooling"]),
    (["--task=movie_reviews", "--output_dir=OUT", "--strategy=multi_worker_mirrored"],
     ["runs on one machine"]),
    (["--task=glue/rte", "--output_dir=OUT", "--tfds_data_dir=/nonexistent"],
     ["could not load glue/rte", "--task=classification"]),
])
def test_bad_usage_is_one_line(tmp_path, args, needles):
  args = [a.replace("OUT", str(tmp_path / "out")) for a in args]
  assert_clear_error(run("finetune.py", *args), *needles)


def test_malformed_squad_and_wrong_vocab(tmp_path):
  from electra_tf.data import builtin, vocab

  data = json.load(open(builtin.squad_path("unittest")))
  qa = data["data"][0]["paragraphs"][0]["qas"][1]
  qa["answers"] = [{"text": 5, "answer_start": 0}]
  (tmp_path / "bad.json").write_text(json.dumps(data))
  result = run("finetune.py", "--task=squad_v1.1", f"--train_file={tmp_path}/bad.json",
               f"--output_dir={tmp_path}/o")
  assert_clear_error(result, qa["id"], "'text' must be str")
  lines = open(vocab.builtin_vocab_path(), encoding="utf-8").read().splitlines()
  (tmp_path / "vocab.txt").write_text("\n".join(lines[:-5]) + "\n", encoding="utf-8")
  result = run("finetune.py", "--task=movie_reviews", f"--vocab_file={tmp_path}/vocab.txt",
               f"--output_dir={tmp_path}/o2")
  assert_clear_error(result, "30517 tokens", "30522 rows")
