"""`DigitCaps`'s faster routing paths (`routing._fast`) against the reference.

`dynamic_routing` is the paper's loop and the definition. Every vote layout,
with autodiff's gradient or the written one, must give its values and its
gradients on every backend, not only the path this backend picks; and the
written gradient must agree with central differences of the float64 NumPy
reference.
"""

import numpy as np
import numpy_reference as ref
import pytest
from conftest import central_differences, gradient, numpy, random
from keras import ops

from capsules_keras import DigitCaps, dynamic_routing, exponential_squash
from capsules_keras.routing import _fast

TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}
#: Every path `_fast` can take, whichever this backend picks.
PATHS = {
    "batched_matmul": _fast._BATCHED_MATMUL,
    "einsum": _fast._EINSUM._replace(outer_sum=None),
    "einsum_written_gradient": _fast._EINSUM,
    "elementwise": _fast._ELEMENTWISE,
}
#: 7 children of 3 dims, 4 parents of 5 dims, batch 2: no two sizes alike.
KERNEL, INPUTS = random(7, 4, 3, 5, scale=0.3, seed=1), random(2, 7, 3, seed=2)
#: Fixed weights of the loss, so that every output element has its own
#: gradient: sum(v * V_WEIGHTS) + sum(c * C_WEIGHTS).
V_WEIGHTS, C_WEIGHTS = random(2, 4, 5, seed=3), random(2, 7, 4, seed=4)


def reference(kernel, u, **options):
    """`dynamic_routing` of the votes `einsum("ijnm,bin->bijm", W, u)`."""
    return dynamic_routing(ops.einsum("ijnm,bin->bijm", kernel, u), **options)


def fast(layout, squash_name="sabour"):
    """The fast path through `layout`, with the same signature as `reference`."""

    def route(kernel, u, iterations, stop_gradient_votes, return_coupling, **_):
        return _fast.route_votes(
            layout.votes(kernel, u),
            layout,
            iterations,
            stop_gradient_votes,
            return_coupling,
            squash_name,
        )

    return route


def loss(routed):
    """A scalar of `v` (and `c`) with a distinct weight for every element."""
    v_weights = ops.convert_to_tensor(V_WEIGHTS)
    if not isinstance(routed, tuple):
        return ops.sum(routed * v_weights)
    v, c = routed
    return ops.sum(v * v_weights) + ops.sum(c * ops.convert_to_tensor(C_WEIGHTS))


def assert_same_values_and_gradients(route, expected, **options):
    """`route` and `expected` of (KERNEL, INPUTS) agree, and so do their
    gradients with respect to the kernel and to the input capsules."""
    got, want = route(KERNEL, INPUTS, **options), expected(KERNEL, INPUTS, **options)
    for a, b in zip(
        got if isinstance(got, tuple) else (got,),
        want if isinstance(want, tuple) else (want,),
        strict=True,
    ):
        np.testing.assert_allclose(numpy(a), numpy(b), **TOLERANCE)
    for fn in (route, expected):
        assert np.isfinite(numpy(loss(fn(KERNEL, INPUTS, **options))))
    for argument in ("kernel", "inputs"):

        def of(fn, argument=argument):
            if argument == "kernel":
                return lambda k: loss(fn(k, ops.convert_to_tensor(INPUTS), **options))
            return lambda u: loss(fn(ops.convert_to_tensor(KERNEL), u, **options))

        x = KERNEL if argument == "kernel" else INPUTS
        np.testing.assert_allclose(
            gradient(of(route), x),
            gradient(of(expected), x),
            **TOLERANCE,
            err_msg=f"gradient with respect to the {argument}",
        )


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("iterations", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("stop_gradient_votes", [False, True], ids=["", "stopped"])
@pytest.mark.parametrize("return_coupling", [False, True], ids=["v", "v_and_c"])
def test_every_path_equals_the_reference(
    path, iterations, stop_gradient_votes, return_coupling
):
    assert_same_values_and_gradients(
        fast(PATHS[path]),
        reference,
        iterations=iterations,
        stop_gradient_votes=stop_gradient_votes,
        return_coupling=return_coupling,
    )


@pytest.mark.parametrize("path", ["einsum", "einsum_written_gradient"])
def test_the_exponential_squash_routes_alike_on_both_gradients(path):
    """Efficient-CapsNet's squash has its own written derivative."""
    assert_same_values_and_gradients(
        fast(PATHS[path], "exponential"),
        lambda k, u, **options: reference(
            k, u, squash_fn=exponential_squash, **options
        ),
        iterations=3,
        stop_gradient_votes=False,
        return_coupling=True,
    )


@pytest.mark.parametrize("return_coupling", [False, True], ids=["v", "v_and_c"])
def test_the_chosen_path_equals_the_reference(return_coupling):
    """`fast_dynamic_routing`: this backend's layout, compiled as it picks."""
    assert_same_values_and_gradients(
        lambda k, u, **options: _fast.fast_dynamic_routing(k, u, **options),
        reference,
        iterations=3,
        stop_gradient_votes=False,
        return_coupling=return_coupling,
    )


def test_digit_caps_call_equals_its_votes_routed_by_the_reference():
    """The layer's call (its fast path) against `route(votes(x))`."""
    layer = DigitCaps(4, 5, return_coupling=True)
    layer.build((None, 7, 3))
    layer.kernel.assign(KERNEL)
    for got, want in zip(layer(INPUTS), layer.route(layer.votes(INPUTS)), strict=True):
        np.testing.assert_allclose(numpy(got), numpy(want), **TOLERANCE)
    np.testing.assert_allclose(
        gradient(lambda u: loss(layer(u)), INPUTS),
        gradient(lambda u: loss(layer.route(layer.votes(u))), INPUTS),
        **TOLERANCE,
    )


@pytest.mark.parametrize(
    "squash_name, reference_squash",
    [("sabour", ref.squash), ("exponential", ref.exponential_squash)],
)
@pytest.mark.parametrize("iterations", [1, 2, 3])
@pytest.mark.parametrize("return_coupling", [False, True], ids=["v", "v_and_c"])
def test_written_gradient_matches_the_references_derivative(
    squash_name, reference_squash, iterations, return_coupling
):
    """The votes' gradient written out (`_fast._route_with_gradient`) against
    central differences of the float64 NumPy reference; with
    `return_coupling` the loss also weighs the returned coupling."""
    layout = _fast._EINSUM
    u_hat = random(2, 5, 3, 4, seed=11)
    v_weights, c_weights = random(2, 3, 4, seed=12), random(2, 5, 3, seed=13)
    v_tensor, c_tensor = (
        ops.convert_to_tensor(v_weights),
        ops.convert_to_tensor(c_weights),
    )

    def route(u):
        routed = _fast.route_votes(
            ops.transpose(u, layout.permutation),
            layout,
            iterations,
            False,
            return_coupling,
            squash_name,
        )
        if not return_coupling:
            return ops.sum(routed * v_tensor)
        v, c = routed
        return ops.sum(v * v_tensor) + ops.sum(c * c_tensor)

    def numpy_reference(u):
        v, c = ref.routing(u, iterations, squash_fn=reference_squash)
        return (v * v_weights).sum() + return_coupling * (c * c_weights).sum()

    np.testing.assert_allclose(
        gradient(route, u_hat),
        central_differences(numpy_reference, u_hat),
        rtol=1e-3,
        atol=1e-5,
    )
