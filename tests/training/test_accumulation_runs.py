"""pretrain.py with --gradient_accumulation_steps: exact kill/resume, a resume that changes k."""

import signal

from pretrain_runs import (
  STEPS,
  common_args,
  kill_and_resume,
  run_to_end,
  run_until_step,
)


def test_kills_at_random_points_then_resume_end_like_an_uninterrupted_run(tmp_path, shards):
  kill_and_resume(tmp_path, shards, ["--gradient_accumulation_steps=2"])


def _last_logged(stdout: str) -> dict[str, float]:
  line = [x for x in stdout.splitlines() if x.startswith(f"step {STEPS}/{STEPS}")][-1]
  fields = [part.split() for part in line.split(" | ")[1:]]
  return {f[0]: float(f[1]) for f in fields if len(f) == 2 and f[0].endswith("loss")}


def test_resume_with_another_accumulation_continues_the_same_run(tmp_path, shards):
  """k only changes how each update's gradient is computed: a run stopped at k=1 resumes at
  k=4 and ends as the run that kept k=1, up to float rounding. Not bit-exactly, and not
  weight by weight: once in a few dozen steps here a rounding difference in the generator's
  logits moves one of ~800 samples to the neighbouring id, and Adam then moves those
  tokens' embedding rows by a full step, so the logged losses are compared."""
  reference = tmp_path / "reference"
  result = run_to_end(common_args(reference, shards))
  assert result.returncode == 0, result.stderr[-3000:]
  assert "micro-batches" not in result.stdout
  expected = _last_logged(result.stdout)

  run = tmp_path / "switched"
  rc, out = run_until_step(common_args(run, shards), 16, signal.SIGTERM, 0.0)
  assert rc == 143, out[-3000:]
  step = int(out.split("stopped by SIGTERM at step ")[1].split()[0])
  result = run_to_end(common_args(run, shards, "--gradient_accumulation_steps=4"))
  assert result.returncode == 0, result.stderr[-3000:]
  assert f"resumed from {run}/checkpoints/ckpt-{step} at step {step}" in result.stdout
  assert "note: gradient_accumulation_steps 1 -> 4 on resume" in result.stdout
  assert "global batch 8 x 64 tokens in 4 micro-batches per replica" in result.stdout
  got = _last_logged(result.stdout)
  assert set(got) == {"loss", "gen_loss", "disc_loss"}, got
  for name, value in expected.items():
    assert abs(got[name] - value) <= 1e-2 * value, (name, got[name], value)
