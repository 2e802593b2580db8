"""ELECTRA (Clark et al. 2020) in TensorFlow 2 with tf_keras."""

__version__ = "0.1.0"
