"""Demo: the default run, a 2-layer, 128-wide ELECTRA that learns in minutes on 2 CPU cores.

Sized so that in its 1,500 steps (3M tokens of the built-in corpus) the generator learns
context: its masked-token accuracy ends above twice the frequency baseline that the run
prints beside it. A run this short needs Adam's bias correction and a peak learning rate
of 1e-3 (the authors': 5e-4 with 10,000 warmup steps) for the generator to get past word
frequencies. Embeddings as wide as the blocks and 32-token sequences let its attention
learn word order within the run (narrower embeddings enter the first block through an
unnormalised projection that keeps its attention uniform; longer sequences learn it
later). The discriminator goes through the dip of the short-run regime in the first half
(easy while the generator samples near-random words, hard once it samples by word
frequency; docs/objectives.md); over the second half its held-out loss falls and its
held-out AUC, measured against the improving generator, holds level or rises a little (the
run's closing lines print the change; figures on the benchmarks page). Held-out evaluation
follows the checkpoints, every 250 steps. Position embeddings past 32 stay at their
initialisation (only weight decay shrinks them); fine-tuning at longer sequences trains
them from there.

A preset is a file that defines CONFIG: copy one and pass its path to --model_size.
"""

from electra_tf.config import EncoderConfig, PretrainConfig

CONFIG = PretrainConfig(
    model=EncoderConfig(hidden_size=128, num_layers=2, num_heads=2, intermediate_size=512,
                        embedding_size=128),
    generator_fraction=0.5,
    max_seq_length=32,
    max_predictions_per_seq=5,
    mask_prob=0.15,
    batch_size=64,
    learning_rate=1e-3,
    adam_bias_correction=True,
    num_train_steps=1500,
    warmup_steps=150,
    steps_per_execution=50,
    checkpoint_steps=250,
    log_steps=100,
)
