"""Two-phase pretraining as users run it: 128 tokens, then 512 with --new_phase.

Phase 2 must start from phase 1's last checkpoint with its step and optimizer slots, keep
the one learning-rate schedule (no second warmup), read the 512-token data, and, killed and
resumed, end with the weights of the same phase 2 left alone. Plain-op dropout
(--nofused_kernels) spares each run an XLA compile; resuming is exact either way.
"""

import re
import shutil
import signal

import numpy as np
import pytest
from pretrain_runs import assert_same_state, run_to_end, run_until_step

PEAK, TOTAL, WARMUP, PHASE_END = 1e-3, 28, 20, 12  # phase 2 begins inside the warmup
COMMON = ["--deterministic", "--nofused_kernels", f"--num_train_steps={TOTAL}",
          "--checkpoint_steps=4", "--steps_per_execution=2", "--log_steps=2",
          "--keep_checkpoints=10", f"--learning_rate={PEAK}", f"--warmup_steps={WARMUP}"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  """The built-in corpus (4 articles) built at 128 and at 512 tokens."""
  from electra_tf.data import builtin, pretraining_data, vocab

  corpus = builtin.builtin_corpus(str(tmp_path_factory.mktemp("cache")), max_articles=4)
  built = {}
  for length in (128, 512):
    built[length] = str(tmp_path_factory.mktemp(f"d{length}") / "data")
    pretraining_data.build_pretraining_data(corpus, vocab.builtin_vocab_path(), built[length],
                                            max_seq_length=length, num_workers=1,
                                            min_shards=2, show_progress=False)
  return built


def _schedule(step: int) -> float:
  """The run's one schedule (optimizer.WarmupLinearDecay), as printed (3 digits)."""
  return float(f"{PEAK * (1 - step / TOTAL) * min(1.0, step / WARMUP):.2e}")


def _printed_lr(output: str) -> dict[int, float]:
  return {int(m.group(1)): float(m.group(2))
          for m in re.finditer(r"^step (\d+)/\d+ .*\| lr ([0-9.e+-]+)", output, re.M)}


def _slots(prefix: str, name: str) -> dict[str, np.ndarray]:
  import tensorflow as tf

  reader = tf.train.load_checkpoint(prefix)
  return {k: reader.get_tensor(k) for k in reader.get_variable_to_dtype_map()
          if k.endswith(f"/.OPTIMIZER_SLOT/optimizer/{name}/.ATTRIBUTES/VARIABLE_VALUE")}


def test_phase_two_continues_phase_one_and_resumes_exactly(tmp_path, data):
  one, killed = tmp_path / "run", tmp_path / "killed"
  phase_1 = [f"--train_data={data[128]}", "--max_seq_length=128", "--batch_size=8",
             f"--phase_end_step={PHASE_END}", *COMMON]
  phase_2 = [f"--train_data={data[512]}", "--max_seq_length=512", "--batch_size=4",
             "--new_phase", *COMMON]

  def ckpt(step: int) -> str:
    return f"{one}/checkpoints/ckpt-{step}"


  result = run_to_end([f"--model_dir={one}", *phase_1])
  assert result.returncode == 0, result.stderr[-3000:]
  assert f"phase ended at step {PHASE_END}." in result.stdout
  ckpts = sorted(p.name for p in (one / "checkpoints").glob("ckpt-*.index"))
  assert ckpts == ["ckpt-12.index", "ckpt-4.index", "ckpt-8.index"]
  lr = _printed_lr(result.stdout)
  assert lr[PHASE_END] == _schedule(PHASE_END), lr  # decaying over all 28 steps, not 12
  shutil.copytree(one, killed)
  # What else a new phase may not change: test_phases.py.

  result = run_to_end([f"--model_dir={one}", *phase_2])
  assert result.returncode == 0, result.stderr[-3000:]
  out = result.stdout
  assert f"resumed from {one}/checkpoints/ckpt-12 at step 12" in out, out[-3000:]
  assert ("phase 2 of the run begins at step 12 with the optimizer state and schedule of the "
          "run: max_seq_length 128 -> 512, max_predictions_per_seq 19 -> 79, "
          "batch_size 8 -> 4") in out
  assert "training steps 12..28 on 1 replica(s), global batch 4 x 512 tokens" in out
  lr = _printed_lr(out)
  assert sorted(lr) == list(range(14, TOTAL + 1, 2))
  assert all(lr[step] == _schedule(step) for step in lr), lr  # the warmup goes on, not over
  # Adam's second moments carry on: v(16) = beta_2^4 v(12) + (1 - beta_2) sum g^2, so never
  # below beta_2^4 v(12); reset slots would hold the sum alone.
  before, after = _slots(ckpt(12), "v"), _slots(ckpt(16), "v")
  assert before.keys() == after.keys() and len(before) > 50
  kept = 0.999 ** 4
  for name, value in before.items():
    assert np.all(after[name] >= kept * value * (1 - 1e-5)), name
  carried = sum(float(kept * v.sum()) for v in before.values())
  assert carried > 0.5 * sum(float(v.sum()) for v in after.values())

  # The same phase 2 killed after its step-16 checkpoint; then the job's script reruns
  # both commands: phase 1's has nothing to do, phase 2's resumes.
  rc, out = run_until_step([f"--model_dir={killed}", *phase_2], 18, signal.SIGKILL, 0.0)
  assert rc == -signal.SIGKILL, out[-3000:]
  assert "phase 2 of the run begins at step 12" in out
  result = run_to_end([f"--model_dir={killed}", *phase_1])
  assert result.returncode == 0, result.stderr[-3000:]
  assert f"phase 1 of {killed} is over: the run is in phase 2, begun at step 12" in result.stdout
  result = run_to_end([f"--model_dir={killed}", *phase_2])
  assert result.returncode == 0, result.stderr[-3000:]
  assert "phase 2 of the run, begun at step 12" in result.stdout
  resumed = re.search(r"resumed from \S+ckpt-(\d+) at step", result.stdout)
  assert resumed and int(resumed.group(1)) >= 16, result.stdout[-3000:]
  assert_same_state(ckpt(TOTAL), f"{killed}/checkpoints/ckpt-{TOTAL}",
                    "two-phase run killed in phase 2", rtol=0, atol=0)
