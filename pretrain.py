"""Pretrain ELECTRA from a checkout: `python pretrain.py --help` (installed: electra-pretrain)."""

from electra_tf.commands.pretrain import run

if __name__ == "__main__":
  run()
