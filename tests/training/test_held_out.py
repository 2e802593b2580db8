"""Held-out evaluation during pretraining and the evaluate-only mode."""

import os
import re

from testing_utils import run_command

ARGS = ["--batch_size=8", "--steps_per_execution=2", "--log_steps=4", "--learning_rate=1e-3",
        "--warmup_steps=2", "--deterministic"]


def _eval_lines(output: str) -> list[str]:
  return [line for line in output.splitlines() if line.startswith("eval step ")]


def test_held_out_split_curves_and_eval_only_matches(tmp_path):
  from electra_tf.data import builtin, pretraining_data, vocab

  # Data built with a held-out split: --train_data alone evaluates on its held_out/.
  corpus = builtin.builtin_corpus(str(tmp_path / "cache"), max_articles=6)
  data = str(tmp_path / "data")
  pretraining_data.build_pretraining_data(corpus, vocab.builtin_vocab_path(), data,
                                          max_seq_length=64, num_workers=1, min_shards=2,
                                          show_progress=False, holdout_fraction=0.3)
  run = tmp_path / "run"
  common = [f"--model_dir={run}", f"--train_data={data}", "--eval_batches=2", *ARGS]
  result = run_command("pretrain", *common, "--num_train_steps=8", "--eval_every=4",
                       "--checkpoint_steps=4", timeout=400)
  assert result.returncode == 0, result.stderr[-3000:]
  assert f"held-out data: {data}/held_out (set aside" in result.stdout
  lines = _eval_lines(result.stdout)
  assert [line.split(" | ")[0] for line in lines] == ["eval step 4", "eval step 8"]
  for name in ("gen_accuracy", "disc_auc", "disc_loss", "frequency baseline"):
    assert name in lines[-1], lines[-1]
  baseline = float(re.search(r"frequency baseline ([0-9.]+)", lines[-1]).group(1))
  assert 0.0 < baseline < 0.5
  assert os.listdir(run / "eval"), "no TensorBoard events for the eval curve"
  assert "next: fine-tune it" in result.stdout
  # The closing lines: the last evaluation, and the AUC from the half-way step (4 of 8) on.
  assert re.search(r"held-out at step 8: gen_accuracy [0-9.]+ \([0-9.]+x the frequency "
                   r"baseline [0-9.]+\), disc_auc", result.stdout), result.stdout[-1500:]
  assert "held-out disc_auc over the second half: " in result.stdout
  assert re.search(r"at step 4, [0-9.]+ at step 8 \([+-][0-9.]+\)", result.stdout)
  # Evaluate-only on the newest checkpoint (step 8) in a new process: the same figures as
  # the run's own evaluation of those weights, its last line.
  again = run_command("pretrain", *common, "--num_train_steps=8", "--eval_only", timeout=300)
  assert again.returncode == 0, again.stderr[-3000:]
  assert _eval_lines(again.stdout) == [lines[-1]]


def test_summary_compares_generator_with_baseline_and_auc_over_second_half():
  from electra_tf.training.evaluation import held_out_summary

  history = [{"step": s, "gen_accuracy": 0.1 + s / 10_000, "disc_auc": auc}
             for s, auc in ((500, 0.60), (750, 0.57), (1000, 0.56), (1500, 0.58))]
  lines = held_out_summary(history, 0, 1500, 0.05)
  assert lines[0] == ("held-out at step 1500: gen_accuracy 0.250 (5.0x the frequency "
                      "baseline 0.050), disc_auc 0.580")
  # The second half starts at step 750: 0.57 there, 0.58 at the end.
  assert lines[1] == ("held-out disc_auc over the second half: 0.570 at step 750, 0.580 at "
                      "step 1500 (+0.010)")
  # A phase from step 1000 to 2000 is half over at 1500; one evaluation there is no trend.
  assert held_out_summary(history, 1000, 2000, None) == [
      "held-out at step 1500: gen_accuracy 0.250, disc_auc 0.580"]
  assert held_out_summary([], 0, 1500, 0.05) == []


def _evaluator_after(history, started_at, two_stage_steps=0):
  """A HeldOutEvaluator whose process began training at `started_at` and made `history`."""
  from types import SimpleNamespace

  from electra_tf.training.evaluation import HeldOutEvaluator

  evaluator = HeldOutEvaluator(None, 1, 250, None, 0.05)
  step = SimpleNamespace(numpy=lambda: started_at)
  evaluator.set_model(SimpleNamespace(optimizer=SimpleNamespace(iterations=step),
                                      config=SimpleNamespace(two_stage_steps=two_stage_steps)))
  evaluator.on_train_begin()
  # A two-stage run fits once per stage; the second fit must not move where it began.
  step.numpy = lambda: max(started_at, two_stage_steps)
  evaluator.on_train_begin()
  evaluator.history = [{"step": s, "gen_accuracy": 0.2, "disc_auc": auc} for s, auc in history]
  return evaluator


def test_summary_of_a_run_resumed_past_half_way_has_no_second_half_line():
  # Resumed at step 1000 of 0..1500: its first evaluation (1250) is not where the second half
  # began (750, evaluated by the process before), so no line may say it is.
  evaluator = _evaluator_after([(1250, 0.60), (1500, 0.58)], started_at=1000)
  assert evaluator.summary(0, 1500) == [
      "held-out at step 1500: gen_accuracy 0.200 (4.0x the frequency baseline 0.050), "
      "disc_auc 0.580"]
  # Resumed before the half-way step, this process evaluated from 750 on: the line holds.
  evaluator = _evaluator_after([(750, 0.55), (1000, 0.57), (1500, 0.58)], started_at=500)
  assert evaluator.summary(0, 1500)[1] == (
      "held-out disc_auc over the second half: 0.550 at step 750, 0.580 at step 1500 (+0.030)")


def test_summary_of_two_stage_run_skips_second_half_that_starts_with_untrained_detector():
  # The generator trains alone to step 1000, past the half-way step 750: the AUC at 750 and
  # at 1000 is an untrained detector's, so a "second half" from there compares nothing.
  history = [(250, 0.50), (500, 0.50), (750, 0.50), (1000, 0.50), (1250, 0.60), (1500, 0.62)]
  evaluator = _evaluator_after(history, started_at=0, two_stage_steps=1000)
  assert len(evaluator.summary(0, 1500)) == 1
  # The same boundary exactly at the half-way step: its evaluation is still untrained.
  evaluator = _evaluator_after(history, started_at=0, two_stage_steps=750)
  assert len(evaluator.summary(0, 1500)) == 1
  # A generator stage that ends before the half-way step leaves a trained detector there.
  evaluator = _evaluator_after(history, started_at=0, two_stage_steps=500)
  assert evaluator.summary(0, 1500)[1] == (
      "held-out disc_auc over the second half: 0.500 at step 750, 0.620 at step 1500 (+0.120)")
