"""bench/quality/ablation.py's changed miniatures: overrides reach the config and guard the
ledger."""

import json
import os
import shutil
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench", "quality"))

import ablation  # noqa: E402


def test_overrides_change_the_miniature_and_nothing_else():
  plain = ablation.base_config(False, 500)
  changed = ablation.base_config(False, 500, {"model.embedding_size": 64,
                                              "max_seq_length": 128, "batch_size": 32,
                                              "max_predictions_per_seq": 20})
  assert plain.model.embedding_size == 128 and plain.max_seq_length == 32
  assert plain.generator_fraction == 0.5 and plain.max_predictions_per_seq == 5
  assert changed.model.embedding_size == 64
  assert (changed.max_seq_length, changed.batch_size) == (128, 32)
  assert changed.max_predictions_per_seq == 20
  assert changed.model.hidden_size == plain.model.hidden_size
  assert changed.learning_rate == plain.learning_rate
  assert changed.generator_fraction == plain.generator_fraction
  assert changed.model.vocab_size == 500


def test_ledger_refuses_results_of_another_miniature(tmp_path):
  ledger = str(tmp_path / "objectives")
  ablation._check_settings(ledger, False, 2000, [0, 1, 2])  # noqa: SLF001
  ablation._check_settings(ledger, False, 2000, [0, 1, 2])  # the same settings resume
  with pytest.raises(SystemExit, match="other settings"):
    ablation._check_settings(ledger, False, 2000, [0, 1, 2],  # noqa: SLF001
                             {"model.embedding_size": 128})
  with pytest.raises(SystemExit, match="other settings"):
    ablation._check_settings(ledger, False, 6000, [0, 1, 2])  # noqa: SLF001


def test_unknown_arm_is_refused_before_any_work(tmp_path):
  with pytest.raises(SystemExit, match="no arm nope in the objectives study"):
    ablation.run_study("objectives", str(tmp_path), only_arms=["electra", "nope"])
  assert not os.listdir(tmp_path)


def test_unknown_override_is_refused_before_any_work(tmp_path):
  with pytest.raises(SystemExit, match=r"--config_overrides: unknown EncoderConfig key"):
    ablation.run_study("objectives", str(tmp_path), overrides={"model.nope": 1})
  assert not os.listdir(tmp_path)
  with pytest.raises(SystemExit, match="must be a JSON object"):
    ablation.parse_overrides("[1, 2]")
  with pytest.raises(SystemExit, match="not valid JSON"):
    ablation.parse_overrides("{nope")
  assert ablation.parse_overrides(None) is None
  assert ablation.parse_overrides('{"batch_size": 8}') == {"batch_size": 8}


def test_tables_list_as_pending_only_the_arms_asked_for(tmp_path):
  base = ablation.base_config(True, 500)
  plan = [(arm, ablation.arm_config("objectives", arm, base, 24))
          for arm in ablation.arms("objectives", quick=True)]
  scores = {task: {"random": [0.5, 0.6], "electra": [0.7, 0.8]}
            for task in ("movie_reviews", "trec")}
  meta = {"command": "c", "commit": "x", "cpu": "cpu", "seeds": [0, 1], "wall_time": "1 min"}
  quiet = dict(log=lambda line: None)
  whole = ablation._write_results("objectives", str(tmp_path), plan, scores,
                                  {"electra": {}}, meta, **quiet)
  assert whole["pending_arms"] == [arm.name for arm, _ in plan if arm.name != "electra"]
  some = ablation._write_results("objectives", str(tmp_path), plan, scores,
                                 {"electra": {}}, meta, only_arms=["electra", "mlm"], **quiet)
  assert some["pending_arms"] == ["mlm"]
  assert "Still to run: mlm." in (tmp_path / "ablation_objectives.md").read_text()
  assert some["rows"]["electra"]["average"]["mean"] == 75.0


def test_command_names_paths_in_the_checkout_relative_to_it(tmp_path):
  inside = os.path.join(ablation.RESULTS, "budget_4x")
  line = ablation._command_line(["--study=objectives", f"--results_dir={inside}",
                                 f"--workdir={tmp_path}", "--steps=24000"])
  assert line == ("python bench/quality/ablation.py --study=objectives "
                  f"--results_dir=bench/results/ablation/budget_4x --workdir={tmp_path} "
                  "--steps=24000")
  # JSON overrides come back quoted, so the printed command runs as it reads.
  line = ablation._command_line(['--config_overrides={"seed": 1}', "--workdir=~/.cache/x"])
  assert line == ("python bench/quality/ablation.py '--config_overrides={\"seed\": 1}' "
                  "--workdir=~/.cache/x")
  # An empty argument is an argument: unquoted, a shell would drop it.
  line = ablation._command_line(["--study=objectives", "", "--steps=100"])
  assert line == "python bench/quality/ablation.py --study=objectives '' --steps=100"


def _ledger_with_electra(root, seeds, accuracy=0.75):
  """An objectives ledger (the study's settings) whose electra arm has finished."""
  ablation._check_settings(str(root / "objectives"), False, 6000, seeds)  # noqa: SLF001
  (root / "objectives" / "pretrain").mkdir()
  (root / "objectives" / "pretrain" / "electra.json").write_text('{"steps": 6000}')
  (root / "objectives" / "finetune").mkdir()
  for task in ("movie_reviews", "trec"):
    lines = [{"encoder": name, "seed": seed, "accuracy": accuracy + 0.01 * seed + bonus,
              "train_loss": 0.2 + seed, "seconds": 30.0}
             for name, bonus in (("electra", 0.0), ("mlm", 0.1)) for seed in seeds]
    (root / "objectives" / "finetune" / f"{task}.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines))


def _adopt(root, seeds, log=None):
  # The study's budget: the toy budget's generators are a quarter as wide, so there
  # generator_1_2 is not the objectives study's electra.
  base = ablation.base_config(False, 8192)
  arm = next(a for a in ablation.arms("generator_size") if a.name == "generator_1_2")
  config = ablation.arm_config("generator_size", arm, base, 6000)
  return ablation.adopt_identical_run(str(root), "generator_size", arm, config, base, 6000,
                                      seeds, False, log or (lambda line: None))


def _records(path):
  return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_an_arm_that_is_another_studys_run_takes_its_records(tmp_path):
  seeds = [0, 1]
  _ledger_with_electra(tmp_path, seeds)
  ledger = tmp_path / "generator_size"
  ablation._check_settings(str(ledger), False, 6000, seeds)  # noqa: SLF001
  # A run of it already in the ledger, agreeing with the other study's: kept, not doubled.
  (ledger / "finetune").mkdir()
  (ledger / "finetune" / "trec.jsonl").write_text(json.dumps(
      {"encoder": "generator_1_2", "seed": 0, "accuracy": 0.75, "train_loss": 0.2,
       "seconds": 41.0}) + "\n")
  assert _adopt(tmp_path, seeds)
  for task in ("movie_reviews", "trec"):
    ours = _records(ledger / "finetune" / f"{task}.jsonl")
    assert sorted((r["encoder"], r["seed"]) for r in ours) == [("generator_1_2", 0),
                                                              ("generator_1_2", 1)]
    assert {r["seed"]: r["accuracy"] for r in ours} == {0: 0.75, 1: 0.76}
  record = json.loads((ledger / "pretrain" / "generator_1_2.json").read_text())
  assert record == {"steps": 6000, "same_run": "objectives/electra"}
  # Resumed, the study finds nothing of the arm to run.
  assert not ablation.study_lib.pending({"generator_1_2": None}, seeds,
                                                str(ledger / "finetune"), True)
  rows = {"generator_1_2": {"movie_reviews": {"mean": 75.5, "stderr": 0.5, "seeds": [75, 76]},
                            "average": {"mean": 75.5, "stderr": 0.5}, "pretrain": record}}
  meta = {"command": "c", "commit": "x", "cpu": "cpu", "seeds": seeds, "wall_time": "1 min"}
  assert "generator_1_2 is objectives/electra" in ablation.markdown("generator_size", rows, meta)


def test_an_arm_is_pretrained_unless_the_other_run_is_the_same_and_finished(tmp_path):
  seeds = [0, 1]
  messages = []
  _ledger_with_electra(tmp_path, seeds)
  # Other settings in this study's ledger (another budget): not the same run.
  ablation._check_settings(str(tmp_path / "generator_size"), False, 12000, seeds)  # noqa: SLF001
  assert not _adopt(tmp_path, seeds, messages.append)
  assert "other settings" in messages[-1]
  shutil.rmtree(tmp_path / "generator_size")
  ablation._check_settings(str(tmp_path / "generator_size"), False, 6000, seeds)  # noqa: SLF001
  # A run the other study has not fine-tuned yet.
  trec = tmp_path / "objectives" / "finetune" / "trec.jsonl"
  complete = trec.read_text()
  trec.write_text("".join(line + "\n" for line in complete.splitlines()
                          if '"electra", "seed": 1' not in line))
  assert not _adopt(tmp_path, seeds, messages.append)
  assert "has not finished" in messages[-1]
  trec.write_text(complete)
  # A run of this arm already recorded that the other study's does not match, even where
  # only its training loss differs.
  (tmp_path / "generator_size" / "finetune").mkdir()
  ours = tmp_path / "generator_size" / "finetune" / "trec.jsonl"
  ours.write_text(json.dumps({"encoder": "generator_1_2", "seed": 1, "accuracy": 0.76,
                              "train_loss": 1.25}) + "\n")
  assert not _adopt(tmp_path, seeds, messages.append)
  assert "differ" in messages[-1]
  assert not (tmp_path / "generator_size" / "pretrain").exists()
  assert len(_records(ours)) == 1
  # This ledger's own pretraining of the arm (not a copy): it is finished here.
  ours.unlink()
  (tmp_path / "generator_size" / "pretrain").mkdir()
  (tmp_path / "generator_size" / "pretrain" / "generator_1_2.json").write_text('{"steps": 6000}')
  assert not _adopt(tmp_path, seeds, messages.append)
  assert "its own run" in messages[-1]
  assert not ours.exists()
  # The arms named the same run have equal configs at the study's own budget too.
  base = ablation.base_config(False, 8192)
  for study, name in (("generator_size", "generator_1_2"), ("sharing", "tied")):
    arm = next(a for a in ablation.arms(study) if a.name == name)
    other = next(a for a in ablation.arms(arm.same_as[0]) if a.name == arm.same_as[1])
    assert (ablation.arm_config(study, arm, base, ablation.ELECTRA_STEPS)
            == ablation.arm_config(arm.same_as[0], other, base, ablation.ELECTRA_STEPS))


def test_fine_tuning_results_are_guarded_by_the_vocabs_content_not_its_path(tmp_path):
  from study_lib import record_settings  # noqa: PLC0415

  from electra_tf.data.vocab import load_vocab  # noqa: PLC0415

  words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a"]
  first, copy, other = (tmp_path / name for name in ("vocab.txt", "copy.txt", "other.txt"))
  first.write_text("\n".join(words) + "\n")
  copy.write_text("\n".join(words) + "\n")
  other.write_text("\n".join([*words, "an"]) + "\n")

  def settings(vocab):
    return {"recipe": {"learning_rate": 1e-3}, "encoder": {"hidden_size": 128},
            "vocab_md5": load_vocab(str(vocab)).md5, "parts": {},
            "tasks": {"trec": {"epochs": 20}}}

  results = tmp_path / "results"
  record_settings(str(results), settings(first))
  record_settings(str(results), settings(copy))  # the same words elsewhere: the same vocab
  with pytest.raises(SystemExit, match="another vocab"):
    record_settings(str(results), settings(other))
  # A directory written when the vocab was recorded by its path reads as that file's digest.
  recorded = json.loads((results / "settings.json").read_text())
  legacy = {k: v for k, v in recorded.items() if k != "vocab_md5"}
  (results / "settings.json").write_text(json.dumps({**legacy, "vocab": str(first)}))
  record_settings(str(results), settings(copy))
  assert json.loads((results / "settings.json").read_text()) == recorded
  (results / "settings.json").write_text(json.dumps({**legacy, "vocab": str(first)}))
  with pytest.raises(SystemExit, match="another vocab"):
    record_settings(str(results), settings(other))
  # ... unless that file is gone: then it says so instead of guessing.
  (results / "settings.json").write_text(json.dumps({**legacy, "vocab": str(tmp_path / "x")}))
  with pytest.raises(SystemExit, match="path that is gone"):
    record_settings(str(results), settings(first))


def test_tables_name_where_each_arm_was_pretrained():
  def row(mean, **record):
    return {"trec": {"mean": mean, "stderr": 0.1, "seeds": [mean]},
            "average": {"mean": mean, "stderr": 0.1}, "pretrain": record}

  rows = {"random": {k: v for k, v in row(70.0).items() if k != "pretrain"},
          "electra": row(72.0, cpu="AMD EPYC (no AMX), 2 cores", commit="aaa"),
          "mlm": row(73.0, cpu="AMD EPYC (no AMX), 2 cores", commit="aaa"),
          "electra_15": row(71.0, cpu="Intel Xeon (no AMX), 2 cores", commit="bbb"),
          "two_stage": row(69.0)}
  meta = {"command": "c", "commit": "bbb", "cpu": "Intel", "seeds": [0], "wall_time": "1 min"}
  table = ablation.markdown("objectives", rows, meta)
  assert table.rstrip().endswith(
      "Pretrained on: mlm, electra: AMD EPYC (no AMX), 2 cores, aaa; electra_15: Intel Xeon "
      "(no AMX), 2 cores, bbb; two_stage: a CPU not recorded, a commit not recorded.")


def test_a_run_recorded_twice_counts_once(tmp_path):
  from study_lib import TASKS, finetune_all  # noqa: PLC0415

  vocab = tmp_path / "vocab.txt"
  vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the"]) + "\n")
  runs = [{"encoder": "e", "seed": 0, "accuracy": 0.5}, {"encoder": "e", "seed": 1,
                                                        "accuracy": 0.7},
          {"encoder": "e", "seed": 0, "accuracy": 0.6}]  # seed 0 again, from a second process
  (tmp_path / "trec.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
  config = ablation.base_config(False, 6).model
  scores = finetune_all(config, str(vocab), {"e": None}, [0, 1], str(tmp_path),
                        tasks={"trec": TASKS["trec"]})
  assert scores == {"trec": {"e": [0.5, 0.7]}}
