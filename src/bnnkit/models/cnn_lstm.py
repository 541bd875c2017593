"""The CNN-LSTM for IMDB sentiment (token ids in, class scores out).

As bnn_hmc's ``make_cnn_lstm`` (after Wenzel et al., 2020), for a sequence of T token ids::

    Embed(V × 128)                      (T, 128)
    Conv1D(64, kernel 5, VALID) → ReLU  (T − 4, 64)
    max-pool 4 (stride 4, VALID)        (⌊(T − 4) / 4⌋, 64)
    LSTM(128), final hidden state h_T   (128,)
    Dense(num_outputs)

With the paper's T = 100 the LSTM runs 24 steps. The LSTM cell is flax's
:class:`~flax.linen.OptimizedLSTMCell` (gates i, f, g, o from ``W_x x + W_h h + b``), with zero
initial state. One difference from Haiku's LSTM, which bnn_hmc used: Haiku adds a constant 1 to
the forget gate's pre-activation; here the forget gate has only its learned bias.

Parameter count with vocabulary V, embedding E = 128, F = 64 filters, H = 128 cells, K outputs::

    V·E + (5·E·F + F) + 4·(F·H + H·H + H) + (H·K + K)
    = 128·V + 41 024 + 98 816 + 129·K   (2 700 098 for V = 20 000, K = 2)
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from bnnkit.models.registry import ModelSpec, register


class CNNLSTM(nn.Module):
    """Embedding → Conv1D → ReLU → max-pool → LSTM → Dense, on ``(batch, T)`` token ids.

    Attributes:
        num_outputs: width of the output layer (number of classes).
        vocab_size: number of rows of the embedding table; token ids must be below it.
        embed_dim: embedding width.
        num_filters: channels of the 1-D convolution.
        kernel_size: width of the 1-D convolution.
        pool_size: window and stride of the max-pool over time.
        hidden_size: LSTM state width.

    Example:
        >>> from bnnkit.models.registry import num_params
        >>> net = CNNLSTM(num_outputs=2)
        >>> tokens = jnp.zeros((3, 100), jnp.int32)
        >>> params = jax.eval_shape(net.init, jax.random.PRNGKey(0), tokens)  # shapes only
        >>> jax.eval_shape(net.apply, params, tokens).shape, num_params(params)
        ((3, 2), 2700098)
    """

    num_outputs: int
    vocab_size: int = 20_000
    embed_dim: int = 128
    num_filters: int = 64
    kernel_size: int = 5
    pool_size: int = 4
    hidden_size: int = 128

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        x = nn.Embed(self.vocab_size, self.embed_dim)(tokens)
        x = nn.Conv(self.num_filters, kernel_size=(self.kernel_size,), padding="VALID")(x)
        x = nn.relu(x)
        x = nn.max_pool(x, window_shape=(self.pool_size,), strides=(self.pool_size,))
        # The carry must have the activations' dtype (float64 parameters give float64
        # activations), or the scan over time would see its carry change type.
        zeros = jnp.zeros((x.shape[0], self.hidden_size), x.dtype)
        (_, h), _ = nn.RNN(nn.OptimizedLSTMCell(self.hidden_size), return_carry=True)(
            x, initial_carry=(zeros, zeros)
        )
        return nn.Dense(self.num_outputs)(h)


register(
    "cnn_lstm",
    ModelSpec(
        make=lambda num_outputs: CNNLSTM(num_outputs=num_outputs),
        tasks=("classification",),
        input_rank=1,
        input_dtype="int",
        description="IMDB CNN-LSTM: embed 20k×128, conv1d 64@5, max-pool 4, LSTM 128",
        example_shape=(100,),
    ),
)
