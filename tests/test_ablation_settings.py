"""bench/ablation.py's changed miniatures: overrides reach the config and guard the ledger."""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

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
  inside = os.path.join(ablation.HERE, "results", "ablation", "budget_4x")
  line = ablation._command_line(["--study=objectives", f"--results_dir={inside}",
                                 f"--workdir={tmp_path}", "--steps=24000"])
  assert line == ("python bench/ablation.py --study=objectives "
                  f"--results_dir=bench/results/ablation/budget_4x --workdir={tmp_path} "
                  "--steps=24000")
