"""Fine-tune ELECTRA from a checkout: `python finetune.py --help` (installed: electra-finetune)."""

from electra_tf.commands.finetune import run

if __name__ == "__main__":
  run()
