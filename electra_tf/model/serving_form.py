"""The transformer block's serving form: what ElectraTransformerBlock traces inside
`fused.serving_graph` (SavedModel signatures), written for CPU inference.

Every projection is a 2-D MatMul + BiasAdd over the batch's B * T rows (oneDNN fuses the
pair) instead of the training graph's Einsum on [B, T, ...]; GELU takes its erf form
(elementwise.exact_gelu does inside the block) and LayerNorm is plain ops. Same variables
and, within float32 rounding, the same outputs as Model Garden's call.
"""

from __future__ import annotations

import math

import tensorflow as tf

from electra_tf.model import fused
from electra_tf.model.elementwise import layer_norm_rows


def applies(block, inputs) -> bool:
  """Whether `block` is the plain post-LayerNorm BERT block in float32 that `block_call`
  writes out (anything else serves through Model Garden's call)."""
  att = block._attention_layer
  return (isinstance(inputs, (list, tuple)) and len(inputs) == 2 and not block._norm_first
          and block._use_query_residual and not block._return_attention_scores
          and not block._linformer_dim and block._use_bias and block.compute_dtype == "float32"
          and inputs[0].shape.rank == 3 and att._attention_axes == (1,))


def projections(block) -> list:
  """The projection layers `block_call` multiplies by (for copies in another dtype)."""
  att = block._attention_layer
  return [att._query_dense, att._key_dense, att._value_dense, att._output_dense,
          block._intermediate_dense, block._output_dense]


def block_call(block, inputs) -> tf.Tensor:
  """`block` in inference on [hidden [B, T, H], attention mask [B, 1, T]]; [B, T, H]."""
  hidden, mask = inputs
  att, kernels = block._attention_layer, fused.serving()
  shape, width = tf.shape(hidden), hidden.shape[-1]
  heads, size = att._num_heads, att._key_dim

  def project(layer, rows):
    kernel = kernels.get(layer.kernel.ref())  # a copy in another dtype, if the export made one
    if kernel is None:
      kernel = tf.reshape(layer.kernel, [rows.shape[-1], -1])
    out = tf.matmul(tf.cast(rows, kernel.dtype), kernel)
    return tf.nn.bias_add(tf.cast(out, rows.dtype), tf.reshape(layer.bias, [-1]))

  def heads_major(rows):  # [B * T, N * D] -> [B, N, T, D]
    return tf.transpose(tf.reshape(rows, [shape[0], shape[1], heads, size]), [0, 2, 1, 3])

  rows = tf.reshape(hidden, [-1, width])
  query = heads_major(project(att._query_dense, rows)) * (1.0 / math.sqrt(float(size)))
  scores = tf.matmul(query, heads_major(project(att._key_dense, rows)), transpose_b=True)
  probs = att._masked_softmax(scores, mask)
  context = tf.matmul(probs, heads_major(project(att._value_dense, rows)))
  context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, heads * size])
  rows = layer_norm_rows(project(att._output_dense, context) + rows, block._attention_layer_norm)
  inner = block._intermediate_activation_layer(project(block._intermediate_dense, rows))
  out = layer_norm_rows(project(block._output_dense, inner) + rows, block._output_layer_norm)
  return tf.reshape(out, shape)
