"""A kill and resume of pretrain.py on two CPU replicas (MirroredStrategy).

On two CPU replicas a resumed run is not bitwise equal to the undisturbed one, though two
undisturbed runs are: resumes at steps 6 and 8 were exact, a resume at step 12 or 14
differed from its first step on (up to 0.011 in a weight after 30 steps), a resume at 22 by
about 2e-8; the cause is not found (README, "Preemption and failures"). So the exact
part is checked where it lives: `tests/data/test_data_pipeline.py` checks that the
two-replica input stream resumes exactly. Here the run is killed, resumes from the right
checkpoint, finishes, and ends near the undisturbed weights (relative L2 drift < 2% per
tensor, a loose bound).
"""

import random
import signal

from pretrain_runs import STEPS, assert_close_in_norm, common_args, run_to_end, run_until_step


def test_a_killed_two_replica_run_resumes_and_ends_near_the_undisturbed_one(tmp_path, shards):
  extra = ["--strategy=mirrored", "--cpu_devices=2"]
  rng = random.Random()
  reference = tmp_path / "reference"
  result = run_to_end(common_args(reference, shards, *extra))
  assert result.returncode == 0, result.stderr[-3000:]

  run = tmp_path / "killed"
  args = common_args(run, shards, *extra)
  rc, out = run_until_step(args, rng.randrange(14, 24, 2), signal.SIGKILL, 0.1)
  assert rc == -signal.SIGKILL, out[-2000:]
  from electra_tf.training import checkpoints

  readable = [step for step, prefix in checkpoints.numbered(str(run / "checkpoints"))
              if checkpoints.problem(prefix) is None]
  result = run_to_end(args)
  assert result.returncode == 0, result.stderr[-3000:]
  assert f"resumed from {run}/checkpoints/ckpt-{readable[0]} at step {readable[0]}" in (
      result.stdout), result.stdout[-2000:]
  assert f"step {STEPS}/{STEPS}" in result.stdout
  assert_close_in_norm(str(reference / "checkpoints" / f"ckpt-{STEPS}"),
                       str(run / "checkpoints" / f"ckpt-{STEPS}"), "two replicas", 2e-2)
