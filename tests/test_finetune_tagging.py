"""finetune.py --task=tagging end to end as a user runs it: real Japanese NER sentences
(hironsancorpus) as a CoNLL training file and a JSON-lines dev file, a tiny random encoder
with windows shorter than many sentences; killed after its first epoch, resumed, evaluated,
predictions written back as JSON lines; and its one-line errors."""

import json
import subprocess
import time

import pytest
from testing_utils import assert_clear_error, command_env, command_line, run_command

FAST = ["--max_seq_length=24", "--batch_size=8", "--eval_batch_size=32", "--log_steps=5",
        "--learning_rate=3e-4"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
  """train.conll (token, MeCab part of speech, tag) and dev.jsonl from the corpus's split."""
  from electra_tf.tasks import tagging_corpora

  root = tmp_path_factory.mktemp("tagging")
  _, train, dev = tagging_corpora.hironsan_ner()
  lines = []
  for sentence in train[:32]:
    lines += [f"{raw.split(chr(9))[0]}\t{raw.split(chr(9))[2]}\t{tag}"
              for raw, tag in zip(sentence.source, sentence.tags)] + [""]
  (root / "train.conll").write_text("-DOCSTART-\tX\tO\n\n" + "\n".join(lines), "utf-8")
  dev_rows = [{"id": i, "tokens": list(s.words), "tags": list(s.tags)}
              for i, s in enumerate(dev[:8])]
  (root / "dev.jsonl").write_text(
      "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in dev_rows), "utf-8")
  return root, dev_rows


def _args(root, out, *extra):
  return ["--task=tagging", f"--train_file={root}/train.conll", f"--dev_file={root}/dev.jsonl",
          "--num_train_epochs=2", f"--output_dir={out}", *FAST, *extra]


def test_tagging_trains_resumes_evaluates_and_writes_predictions(tmp_path, files):
  root, dev_rows = files
  out = tmp_path / "ner"
  # The first run is killed once its first epoch is evaluated (its checkpoint is saved).
  first = subprocess.Popen(command_line("finetune", *_args(root, out)), env=command_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  seen = []
  for line in first.stdout:
    seen.append(line)
    if line.startswith("eval epoch 1"):
      deadline = time.time() + 60
      while not (out / "eval_results.json").exists() and time.time() < deadline:
        time.sleep(0.1)
      first.kill()
      break
  first.wait(timeout=60)
  assert any(line.startswith("eval epoch 1") for line in seen), "".join(seen)[-3000:]
  assert "windows" not in "".join(seen)  # the runner speaks of examples
  again = run_command("finetune", *_args(root, out))
  assert again.returncode == 0, again.stderr[-3000:]
  assert "resuming from" in again.stdout and "eval epoch 2" in again.stdout, again.stdout
  assert "eval epoch 1" not in again.stdout
  results = json.load(open(out / "eval_results.json"))
  assert [e["epoch"] for e in results["epochs"]] == [1, 2]
  assert results["main_metric"] == "f1"
  for key in ("f1", "precision", "recall", "strict_f1", "accuracy"):
    assert 0.0 <= results["best"][key] <= 1.0
  # Every word of every dev sentence has one predicted tag, written into its JSON object.
  predicted = [json.loads(line) for line in open(out / "dev_predictions.jsonl")]
  assert [p["id"] for p in predicted] == [r["id"] for r in dev_rows]
  record = json.load(open(out / "best" / "finetune.json"))
  labels = record["spec"]["label_names"]
  assert record["spec"]["scheme"] == "iob2" and "O" in labels
  for row, p in zip(dev_rows, predicted):
    assert len(p["predicted_tags"]) == len(row["tokens"])
    assert set(p["predicted_tags"]) <= set(labels)
  assert max(len(r["tokens"]) for r in dev_rows) > 22  # windows were needed
  # electra-export serves it (tests/serving/test_tagging_export.py checks the signatures).
  exported = run_command("export", f"--checkpoint={out}", f"--export_dir={tmp_path}/e")
  assert exported.returncode == 0 and "tag_text" in exported.stdout, exported.stderr[-3000:]


def test_tagging_errors_are_one_line(tmp_path, files):
  root, _ = files
  bad = tmp_path / "dev.conll"
  bad.write_text("東京\tLOC\tB-LOC\n都\tLOC\tB-XYZ\n", "utf-8")
  result = run_command("finetune", "--task=tagging", f"--train_file={root}/train.conll",
                       f"--dev_file={bad}", f"--output_dir={tmp_path}/o", *FAST)
  assert_clear_error(result, "dev.conll line 2", "'B-XYZ' is not among the training file's")
