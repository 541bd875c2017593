"""LeNet-5 on both image sizes, and the CNN-LSTM's sequence behaviour."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit.models import get


@pytest.mark.parametrize("shape", [(28, 28, 1), (32, 32, 3)])
def test_lenet5_reaches_400_features_for_both_image_sizes(shape):
    model = get("lenet5", 10)
    variables = jax.eval_shape(model.init, jax.random.PRNGKey(0), jnp.zeros((1, *shape)))
    shapes = variables["params"]
    assert shapes["Dense_0"]["kernel"].shape == (16 * 5 * 5, 120)
    assert shapes["Conv_0"]["kernel"].shape == (5, 5, shape[-1], 6)
    out = jax.eval_shape(model.apply, variables, jnp.zeros((3, *shape)))
    assert out.shape == (3, 10)


def test_cnn_lstm_reads_the_whole_sequence_in_order(build):
    _, params, _, tokens, apply = build("cnn_lstm", 2, (100,), True)
    base = np.asarray(apply(params, tokens))
    # The first token still changes the final hidden state, and so does the order of tokens.
    first = tokens.at[:, 0].set((tokens[:, 0] + 1) % 20_000)
    assert not np.allclose(apply(params, first), base)
    assert not np.allclose(apply(params, tokens[:, ::-1]), base)


def test_cnn_lstm_vocabulary_and_shapes():
    model = get("cnn_lstm", 2)
    tokens = jnp.zeros((1, 100), jnp.int32)
    variables = jax.eval_shape(model.init, jax.random.PRNGKey(0), tokens)
    shapes = variables["params"]
    assert shapes["Embed_0"]["embedding"].shape == (20_000, 128)
    assert shapes["Conv_0"]["kernel"].shape == (5, 128, 64)
    lstm = shapes["OptimizedLSTMCell_0"]
    assert lstm["ii"]["kernel"].shape == (64, 128) and lstm["hi"]["kernel"].shape == (128, 128)
    assert jax.eval_shape(model.apply, variables, jnp.zeros((4, 100), jnp.int32)).shape == (4, 2)
