"""Held-out evaluation during pretraining, the evaluate-only mode, and resuming the ablations."""

import os
import re

import pytest
from pretrain_runs import assert_same_state, run_until_step
from testing_utils import run_command

ARGS = ["--batch_size=8", "--steps_per_execution=2", "--log_steps=4", "--learning_rate=1e-3",
        "--warmup_steps=2", "--deterministic"]


def _eval_lines(output: str) -> list[str]:
  return [line for line in output.splitlines() if line.startswith("eval step ")]


def test_eval_data_curves_and_eval_only_repeats(tmp_path, shards):
  run = tmp_path / "run"
  common = [f"--model_dir={run}", f"--train_data={shards}", f"--eval_data={shards}",
            "--eval_batches=2", *ARGS]
  result = run_command("pretrain", *common, "--num_train_steps=8", "--eval_every=4",
                       "--checkpoint_steps=4", timeout=400)
  assert result.returncode == 0, result.stderr[-3000:]
  lines = _eval_lines(result.stdout)
  assert [line.split(" | ")[0] for line in lines] == ["eval step 4", "eval step 8"]
  for name in ("gen_accuracy", "disc_auc", "disc_loss", "frequency baseline"):
    assert name in lines[-1], lines[-1]
  baseline = float(re.search(r"frequency baseline ([0-9.]+)", lines[-1]).group(1))
  assert 0.0 < baseline < 0.5
  assert os.listdir(run / "eval"), "no TensorBoard events for the eval curve"
  assert "next: fine-tune it" in result.stdout
  # Evaluate-only: the newest checkpoint, twice, the same figures as the run's last line.
  again = [run_command("pretrain", *common, "--num_train_steps=8", "--eval_only",
                       timeout=300) for _ in range(2)]
  for other in again:
    assert other.returncode == 0, other.stderr[-3000:]
  assert _eval_lines(again[0].stdout) == _eval_lines(again[1].stdout) == [lines[-1]]


@pytest.mark.parametrize("extra", [
    ["--objective=all_tokens_mlm"],
    ["--objective=electra_15", "--embedding_sharing=gdes"],
    ["--generator_fraction=1.0", "--embedding_sharing=none", "--two_stage_steps=8"],
], ids=["all_tokens_mlm", "electra_15_gdes", "two_stage"])
def test_ablation_arms_resume_exactly(tmp_path, shards, extra):
  common = [f"--train_data={shards}", "--num_train_steps=16", "--checkpoint_steps=4", *ARGS,
            *extra]
  reference = run_command("pretrain", f"--model_dir={tmp_path / 'ref'}", *common, timeout=400)
  assert reference.returncode == 0, reference.stderr[-3000:]
  args = [f"--model_dir={tmp_path / 'cut'}", *common]
  # SIGTERM after step 10: the two-stage run is then past its switch to the discriminator.
  rc, out = run_until_step(args, 10, 15, 0.0)
  assert rc == 143, out[-3000:]
  resumed = run_command("pretrain", *args, timeout=400)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "resumed from" in resumed.stdout
  assert_same_state(str(tmp_path / "ref" / "checkpoints" / "ckpt-16"),
                    str(tmp_path / "cut" / "checkpoints" / "ckpt-16"), " ".join(extra))
  # The export is what fine-tuning reads: a plain discriminator-sized encoder.
  import tensorflow as tf

  names = [n for n, _ in tf.train.list_variables(str(tmp_path / "ref" / "discriminator" / "ckpt"))]
  assert not any("delta" in n for n in names), names
  assert any("encoder" in n for n in names)
