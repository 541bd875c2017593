"""How one unit advances every member of a run: the compiled programs of the run driver.

A unit is whatever ``config.loop(N)`` says (:class:`~bnnkit.inference.base.Loop`): one
``method.step`` on the full training set (``iterations``), one pass of minibatch steps over a
fresh permutation in one ``lax.scan`` (``epochs``, :func:`make_epoch`), or one step per
consecutive chunk of the training set (``chunks``). :func:`unit_function` gives the program
that advances every member by one unit, vmapped over the members under the axis name
:data:`~bnnkit.inference.adaptation.MEMBERS`, or one member after another, with the keys of
:mod:`bnnkit.runs.keys`, so a resume computes the same units bit for bit; with several devices
the members or the data are split over them as :func:`placed_batch` places them.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec

from bnnkit import distributed
from bnnkit import problem as problem_lib
from bnnkit.data.augment import random_crop_flip
from bnnkit.inference.adaptation import MEMBERS
from bnnkit.inference.base import Loop, Method
from bnnkit.runs import sharding
from bnnkit.runs.divergence import finite_members
from bnnkit.runs.keys import AUGMENT_STREAM, DATA_STREAM, NOISE_STREAM, member_keys
from bnnkit.types import Batch


def minibatch_indices(key: jax.Array, num_train: int, batch_size: int) -> jax.Array:
    """A random partition of ``range(num_train)`` into ``num_train // batch_size`` batches.

    Returns:
        ``(num_batches, batch_size)`` indices; the ``num_train % batch_size`` left over are
        dropped for this epoch.

    Example:
        >>> minibatch_indices(jax.random.PRNGKey(0), 10, 3).shape
        (3, 3)
    """
    num_batches = num_train // batch_size
    perm = jax.random.permutation(key, num_train)
    return perm[: num_batches * batch_size].reshape(num_batches, batch_size)


def make_epoch(
    method: Method, batch_size: int, minibatch_sharding=None, *, augment: bool = False
) -> Callable:
    """One member's epoch: ``(state, noise_key, data_key, epoch, train[, augment_key]) ->
    (state, info)``.

    ``info`` is the method's per-step info averaged over the epoch. With ``augment``, step b's
    images are cropped and flipped by :func:`~bnnkit.data.augment.random_crop_flip` with the
    key ``fold_in(fold_in(augment_key, epoch), b)``: a fresh draw every step, on the device, and
    the same again on resume. With ``minibatch_sharding`` (a ``jax.sharding.Sharding`` splitting
    the leading axis over devices) each minibatch is split over the devices, so a minibatch
    gradient is a sum of per-device sums that XLA adds across devices. Pure and jit-able; vmap
    it over members.
    """

    def epoch_fn(state, noise_key, data_key, epoch, train: Batch, augment_key=None):
        if augment and augment_key is None:
            raise ValueError("an augmented epoch needs an augment_key")
        idx = minibatch_indices(jax.random.fold_in(data_key, epoch), train.x.shape[0], batch_size)
        epoch_key = jax.random.fold_in(noise_key, epoch)

        def body(state, inputs):
            b, batch_idx = inputs
            batch = Batch(train.x[batch_idx], train.y[batch_idx])
            if augment:
                crop_key = jax.random.fold_in(jax.random.fold_in(augment_key, epoch), b)
                batch = batch._replace(x=random_crop_flip(crop_key, batch.x))
            if minibatch_sharding is not None:
                batch = jax.lax.with_sharding_constraint(batch, minibatch_sharding)
            return method.step(jax.random.fold_in(epoch_key, b), state, batch)

        state, infos = jax.lax.scan(body, state, (jnp.arange(idx.shape[0]), idx))
        return state, jax.tree.map(lambda a: jnp.mean(a, axis=0), infos)

    return epoch_fn


def placed_batch(built: problem_lib.Problem, loop: Loop, shard: str):
    """The full training set of a full-batch method, placed on the devices (``None`` for the
    others), and the placements of (members, data) over the devices (``None``: one device)."""
    if loop.kind == "iterations":
        batch = built.train_batch()
        placements = sharding.placement(
            shard, loop.num_members, built.dataset.num_train, auto_data=_auto_data()
        )
        if placements is not None:
            batch = distributed.place(batch, placements[1])
        return batch, placements
    if loop.kind == "epochs":
        # The training set is replicated; each minibatch (data) or the members (chains) split.
        return None, sharding.placement(
            shard,
            loop.num_members,
            loop.batch_size,
            data_label="examples per minibatch (--batch-size)",
            auto_data=_auto_data(),
        )
    return None, None


def _auto_data() -> bool:
    """Whether ``--shard auto`` may split the data: not over one CPU's devices, where the
    cross-device sum at every gradient cost more than it saved (an SGD epoch on kin8nm 4x
    slower on 2 devices than on one, an HMC iteration on 276 yacht rows 1.2x; 0.9x on
    kin8nm's 7,372): there it splits chains only, and ``--shard data`` asks for the data."""
    return jax.default_backend() != "cpu"


def epoch_batch(built: problem_lib.Problem, loop: Loop, batch: Batch | None, placements=None):
    """The batch the units take: a minibatch method's whole training set, replicated over the
    devices (each epoch draws its minibatches from it), else ``batch`` as placed."""
    if loop.kind == "epochs":
        batch = built.train_batch()
        if placements is not None:
            batch = distributed.place(batch, NamedSharding(placements[0].mesh, PartitionSpec()))
    return batch


def first_batch(built: problem_lib.Problem, loop: Loop) -> Batch:
    """A batch of the loop's size, for methods whose ``init`` reads the data's shapes."""
    n = min(loop.batch_size or built.dataset.num_train, built.dataset.num_train)
    return built.batch(built.dataset.x_train[:n], built.dataset.y_train[:n])


def unit_function(
    method: Method, loop: Loop, built: problem_lib.Problem, seed: int, placements=None
):
    """``(state, unit, batch) -> (state, info, finite)`` advancing every member by one unit;
    ``finite`` says which members' parameters are all finite after it
    (:func:`~bnnkit.runs.divergence.finite_members`), computed in the unit's own program
    where there is one, so that the check compiles no program of its own."""

    def finite(state):
        return finite_members(method.position(state), loop.num_members)

    def checked(unit_fn: Callable) -> Callable:
        check = jax.jit(finite)

        def run(state, unit, batch):
            state, info = unit_fn(state, unit, batch)
            return state, info, check(state)

        return run

    noise_keys = member_keys(seed, NOISE_STREAM, loop.num_members)
    data_keys = member_keys(seed, DATA_STREAM, loop.num_members)
    # A stream of its own: split(k)[i] is fold_in(k, i) (partitionable threefry), so keys
    # folded from an epoch's data key would repeat those its permutation draws.
    augment_keys = member_keys(seed, AUGMENT_STREAM, loop.num_members)

    if loop.kind == "epochs":
        split_members = placements is not None and not placements[0].is_fully_replicated
        split_data = placements is not None and not placements[1].is_fully_replicated
        if placements is not None:
            # Each member's keys lie where its state does.
            noise_keys, data_keys, augment_keys = distributed.place(
                (noise_keys, data_keys, augment_keys), placements[0]
            )
        one = make_epoch(
            method, loop.batch_size, placements[1] if split_data else None, augment=loop.augment
        )
        if loop.vmap_members:
            members = jax.vmap(one, in_axes=(0, 0, 0, None, None, 0), axis_name=MEMBERS)

            @jax.jit
            def epoch_fn(state, noise, data, unit, batch, crops):
                state, info = members(state, noise, data, unit, batch, crops)
                return state, info, finite(state)

            return lambda state, unit, batch: epoch_fn(
                state, noise_keys, data_keys, unit, batch, augment_keys
            )
        single = jax.jit(one)
        if split_members:
            return checked(
                _sequential_per_device(
                    single, placements[0], loop.num_members, noise_keys, data_keys, augment_keys
                )
            )

        def sequential(state, unit, batch):
            return _in_turn(single, state, noise_keys, data_keys, unit, batch, augment_keys)

        return checked(sequential)

    if method.step_members is not None:  # it compiles its own pieces

        def host_driven(state, unit, batch):
            keys = jax.vmap(lambda k: jax.random.fold_in(k, unit))(noise_keys)
            return method.step_members(keys, state, batch)

        return checked(host_driven)

    @jax.jit
    def step_all(state, unit, batch):
        keys = jax.vmap(lambda k: jax.random.fold_in(k, unit))(noise_keys)
        state, info = jax.vmap(method.step, in_axes=(0, 0, None), axis_name=MEMBERS)(
            keys, state, batch
        )
        return state, info, finite(state)

    return step_all


def _in_turn(single: Callable, state, noise_keys, data_keys, unit, batch, augment_keys):
    """The one-member program ``single`` run for each member in turn (one per row of the
    keys), the results stacked along the member axis."""
    outs = [
        single(
            jax.tree.map(lambda a, m=m: a[m], state),
            noise_keys[m],
            data_keys[m],
            unit,
            batch,
            augment_keys[m],
        )
        for m in range(noise_keys.shape[0])
    ]
    return jax.tree.map(lambda *a: jnp.stack(a), *outs)


def _sequential_per_device(
    single: Callable,
    members: NamedSharding,
    num_members: int,
    noise_keys: jax.Array,
    data_keys: jax.Array,
    augment_keys: jax.Array,
) -> Callable:
    """Members one after another on each device, the devices side by side.

    Each device runs the members that ``members`` places on it, on its own copy of the
    training set, through the same one-member program as on one device; asynchronous dispatch
    lets the devices run concurrently. The results are assembled into arrays split as before.
    """

    def on_device(tree, device):
        # A member-stacked leaf's block of members, or a replicated leaf's copy, on `device`.
        return jax.tree.map(
            lambda a: next(s.data for s in a.addressable_shards if s.device == device), tree
        )

    def sequential(state, unit, batch):
        per_device = []
        for device in sorted(members.addressable_devices, key=lambda d: d.id):
            block, noise, data, crops, train = on_device(
                (state, noise_keys, data_keys, augment_keys, batch), device
            )
            per_device.append(_in_turn(single, block, noise, data, unit, train, crops))
        return jax.tree.map(
            lambda *a: jax.make_array_from_single_device_arrays(
                (num_members, *a[0].shape[1:]), members, list(a)
            ),
            *per_device,
        )

    return sequential


def unit_batch(built: problem_lib.Problem, loop: Loop, unit: int, full: Batch | None):
    if loop.kind == "iterations":
        return full
    if loop.kind == "epochs":
        return full
    start = unit * loop.batch_size
    stop = min(start + loop.batch_size, built.dataset.num_train)
    return built.batch(built.dataset.x_train[start:stop], built.dataset.y_train[start:stop])
