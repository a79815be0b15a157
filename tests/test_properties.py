"""Property-based tests (hypothesis) of the vector-capsule layers and routings.

hypothesis draws the shapes (batch 1-4, capsules 1-12, dimensions 1-8), the
iterations (1-5), the options and the dtype (float32; float16 and bfloat16
within the reduced-precision tolerance of test_routings.py), and each result
is held to the float64 NumPy reference in numpy_reference.py:

- the functions `squash`, `exponential_squash` and `safe_norm`;
- the layers `Squash`, `Length`, `Mask`, `PrimaryCaps` and `DigitCaps` with
  each of its routings;
- the routings `dynamic_routing`, `self_attention_routing`,
  `inverted_dot_product_routing` and `em_routing`.

Then the argument checks: hypothesis draws bad values (zero, negatives,
floats, bools, strings, None, inputs of the wrong rank) and each must raise a
ValueError that names it, Keras-style: `Received: name=value`.

The profile is derandomized: CI and every rerun draw the same cases (fewer
on jax, which compiles each one: see `cases`).
"""

import functools
import math
import re

import keras
import ml_dtypes
import numpy as np
import numpy_reference as ref
import pytest
from conftest import TOLERANCE, numpy
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from keras import ops

from capsules_keras import (
    DigitCaps,
    Length,
    Mask,
    PrimaryCaps,
    Squash,
    dynamic_routing,
    em_routing,
    exponential_squash,
    inverted_dot_product_routing,
    safe_norm,
    self_attention_routing,
    squash,
)

settings.register_profile(
    "capsules_keras",
    max_examples=25,  # per test; the reference tests take `cases()`
    deadline=None,  # a case's first call may compile; its time says nothing
    derandomize=True,  # the same cases in CI and on every rerun
    database=None,  # derandomized cases need no replay database
    suppress_health_check=[HealthCheck.too_slow],
)
PROFILE = settings.get_profile("capsules_keras")


def cases(n=25):
    """Cases for a test against a reference: `n`, a sixth of them on jax.

    jax compiles each new shape and configuration of a layer or a routing
    (up to 2.5 s each on a 2-core CPU) where torch and tensorflow run it
    eagerly in milliseconds; a sixth keeps the file under a minute there.
    """
    return max(n // 6, 3) if keras.backend.backend() == "jax" else n


# One parent capsule is a case hypothesis draws on purpose; Keras warns that
# a softmax over one parent is always 1, which is what routing means there.
pytestmark = pytest.mark.filterwarnings(
    "ignore:You are using a softmax over axis:UserWarning"
)

#: float32 against the float64 references as in the rest of the suite;
#: float16 and bfloat16 with test_routings.py's atol, plus a relative part for
#: results that are not bounded by 1 (lengths).
REDUCED = {"rtol": 1e-2, "atol": 3e-2}
#: EM routing in float32 (see `test_em_routing_matches_reference`).
EM_FLOAT32 = {"rtol": 1e-4, "atol": 1e-4}
TOLERANCES = {"float32": TOLERANCE, "float16": REDUCED, "bfloat16": REDUCED}
#: NumPy's type of each dtype drawn (bfloat16: ml_dtypes', a Keras dependency).
NUMPY_DTYPES = {
    "float32": np.float32,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
}
#: A layer's dtype policy for each dtype: weights stay float32.
POLICIES = {
    "float32": "float32",
    "float16": "mixed_float16",
    "bfloat16": "mixed_bfloat16",
}
SQUASHES = {"sabour": squash, "exponential": exponential_squash}
REFERENCE_SQUASHES = {"sabour": ref.squash, "exponential": ref.exponential_squash}
#: `DigitCaps(routing=...)` and its default iterations.
ROUTING_ITERATIONS = {"dynamic": 3, "self_attention": 1, "inverted_dot_product": 3}

# --- Strategies: valid inputs -------------------------------------------------


def dtypes():
    return st.sampled_from(("float32", "float16", "bfloat16"))


def batch_sizes():
    return st.integers(1, 4)


def capsule_counts():
    return st.integers(1, 12)


def capsule_dims():
    return st.integers(1, 8)


def iteration_counts():
    return st.integers(1, 5)


def squash_variants():
    return st.sampled_from(sorted(SQUASHES))


def epsilons():
    return st.sampled_from((1e-7, 1e-3, 1.0))


def seeds():
    return st.integers(0, 2**31 - 2)  # int32, with room for `seed + 1`


@st.composite
def arrays(draw, shape, scales=(0.0, 1e-3, 0.1, 0.5, 1.0, 2.0)):
    """Seeded N(0, scale^2) float32 values of `shape`.

    hypothesis draws the seed and the scale (zero, where every squash and
    norm has its edge, included) and NumPy the values: thousands of values
    drawn one by one would be slow and too large for hypothesis to shrink.
    """
    scale = draw(st.sampled_from(scales))
    values = np.random.default_rng(draw(seeds())).standard_normal(shape)
    return (scale * values).astype("float32")


@st.composite
def tensors_and_axes(draw, min_rank=1):
    """A tensor of rank `min_rank`-4 (sides 1-6) and one of its axes."""
    shape = draw(st.lists(st.integers(1, 6), min_size=min_rank, max_size=4))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    return draw(arrays(tuple(shape))), axis


@st.composite
def votes(draw, dim=None):
    """`u_hat` `(batch_size, in_capsules, out_capsules, out_dim)`."""
    shape = (
        draw(batch_sizes()),
        draw(capsule_counts()),
        draw(capsule_counts()),
        dim or draw(capsule_dims()),
    )
    return draw(arrays(shape))


@st.composite
def capsules(draw):
    """`(batch_size, num_capsules, capsule_dim)`."""
    shape = (draw(batch_sizes()), draw(capsule_counts()), draw(capsule_dims()))
    return draw(arrays(shape))


@st.composite
def primary_caps_cases(draw):
    """PrimaryCaps arguments and images small enough for the loop reference."""
    padding = draw(st.sampled_from(("valid", "same")))
    height, width = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    limit = {"valid": (min(height, 4), min(width, 4)), "same": (4, 4)}[padding]
    kernel = (draw(st.integers(1, limit[0])), draw(st.integers(1, limit[1])))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))

    def int_or_pair(pair):
        return pair[0] if pair[0] == pair[1] and draw(st.booleans()) else pair

    arguments = {
        "capsule_types": draw(st.integers(1, 4)),
        "capsule_dim": draw(st.integers(1, 4)),
        "kernel_size": int_or_pair(kernel),
        "strides": int_or_pair(strides),
        "padding": padding,
    }
    shape = (draw(batch_sizes()), height, width, draw(st.integers(1, 3)))
    return arguments, draw(arrays(shape))


@st.composite
def digit_caps_arguments(draw):
    """DigitCaps arguments: a routing with the iterations and options it takes."""
    routing = draw(st.sampled_from(sorted(ROUTING_ITERATIONS)))
    if routing == "self_attention":  # one pass
        iterations = draw(st.sampled_from((None, 1)))
    else:
        iterations = draw(st.none() | iteration_counts())
    options = {
        "dynamic": {"stop_gradient_votes": draw(st.booleans())},
        "self_attention": {},
        "inverted_dot_product": {"scale_agreement": draw(st.booleans())},
    }[routing]
    return {
        "num_capsules": draw(capsule_counts()),
        "capsule_dim": draw(capsule_dims()),
        "routing_iterations": iterations,
        "routing": routing,
        "squash": draw(squash_variants()),
        **options,
    }


# --- Helpers ------------------------------------------------------------------


def quantized(x, dtype):
    """`x` rounded to `dtype`, as float64: what the library computes with.
    In NumPy: a cast on the backend would compile at every new shape on jax."""
    return np.asarray(numpy(x)).astype(NUMPY_DTYPES[dtype]).astype("float64")


def as_float64(x):
    """A tensor of any float dtype as a float64 array."""
    if keras.backend.standardize_dtype(x.dtype) == "bfloat16":
        x = ops.cast(x, "float32")  # tensorflow converts no 0-d bfloat16
    return np.asarray(numpy(x), dtype="float64")


def assert_close(actual, expected, dtype, tolerance=None):
    """`actual` (a tensor) within `dtype`'s tolerance of `expected`."""
    tolerance = tolerance or TOLERANCES[dtype]
    np.testing.assert_allclose(as_float64(actual), expected, **tolerance)


def assert_dtype(x, dtype):
    assert keras.backend.standardize_dtype(x.dtype) == dtype


def on_axis(fn, x, axis, *args):
    """`fn` of the last axis applied along `axis`."""
    return np.moveaxis(fn(np.moveaxis(x, axis, -1), *args), -1, axis)


def gaussian(seed, shape, scale=1.0, mean=0.0):
    return mean + scale * np.random.default_rng(seed).standard_normal(shape)


# --- Functions ----------------------------------------------------------------


@settings(PROFILE, max_examples=cases())
@given(
    case=tensors_and_axes(),
    variant=squash_variants(),
    epsilon=epsilons(),
    dtype=dtypes(),
)
def test_squash_functions_match_reference(case, variant, epsilon, dtype):
    s, axis = case
    v = SQUASHES[variant](ops.cast(s, dtype), axis=axis, epsilon=epsilon)
    assert_dtype(v, dtype)
    s = quantized(s, dtype)
    assert_close(v, on_axis(REFERENCE_SQUASHES[variant], s, axis, epsilon), dtype)


@settings(PROFILE, max_examples=cases())
@given(
    case=tensors_and_axes(),
    keepdims=st.booleans(),
    epsilon=epsilons(),
    dtype=dtypes(),
)
def test_safe_norm_matches_reference(case, keepdims, epsilon, dtype):
    x, axis = case
    length = safe_norm(
        ops.cast(x, dtype), axis=axis, keepdims=keepdims, epsilon=epsilon
    )
    assert_dtype(length, dtype)
    squared = np.sum(quantized(x, dtype) ** 2, axis=axis, keepdims=keepdims)
    assert_close(length, np.sqrt(squared + epsilon), dtype)


# --- Layers -------------------------------------------------------------------


@settings(PROFILE, max_examples=cases())
@given(
    case=tensors_and_axes(min_rank=2),
    variant=squash_variants(),
    epsilon=epsilons(),
    dtype=dtypes(),
)
def test_squash_layer_matches_reference(case, variant, epsilon, dtype):
    s, axis = case
    layer = Squash(axis=axis, epsilon=epsilon, squash=variant, dtype=POLICIES[dtype])
    v = layer(s)
    assert_dtype(v, dtype)
    s = quantized(s, dtype)
    assert_close(v, on_axis(REFERENCE_SQUASHES[variant], s, axis, epsilon), dtype)


@settings(PROFILE, max_examples=cases())
@given(case=tensors_and_axes(min_rank=2), epsilon=epsilons(), dtype=dtypes())
def test_length_layer_matches_reference(case, epsilon, dtype):
    v, _ = case
    lengths = Length(epsilon=epsilon, dtype=POLICIES[dtype])(v)
    assert_dtype(lengths, dtype)
    squared = np.sum(quantized(v, dtype) ** 2, axis=-1)
    assert_close(lengths, np.sqrt(squared + epsilon), dtype)


#: The label formats Mask takes, from integer labels `y` of `n` capsules.
LABEL_FORMATS = {
    "int": lambda y, n: y,
    "column": lambda y, n: y[:, None],
    "one_hot": lambda y, n: np.eye(n, dtype="float32")[y],
}


@settings(PROFILE, max_examples=cases())
@given(
    v=capsules(),
    label_seed=seeds(),
    label_format=st.sampled_from(sorted(LABEL_FORMATS)),
    dtype=dtypes(),
)
def test_mask_with_labels_keeps_the_labelled_capsule(
    v, label_seed, label_format, dtype
):
    batch_size, num_capsules, _ = v.shape
    # With one capsule a (batch_size, 1) column reads as one-hot rows.
    if label_format == "column" and num_capsules == 1:
        label_format = "int"
    y = np.random.default_rng(label_seed).integers(0, num_capsules, batch_size)
    labels = LABEL_FORMATS[label_format](y.astype("int32"), num_capsules)
    masked = Mask(dtype=POLICIES[dtype])([v, labels])
    assert_dtype(masked, dtype)
    onehot = np.eye(num_capsules)[y]
    expected = (quantized(v, dtype) * onehot[..., None]).reshape(batch_size, -1)
    np.testing.assert_array_equal(as_float64(masked), expected)


@settings(PROFILE, max_examples=cases())
@given(v=capsules(), dtype=dtypes())
def test_mask_without_labels_keeps_a_longest_capsule(v, dtype):
    batch_size, num_capsules, _ = v.shape
    masked = Mask(dtype=POLICIES[dtype])(v)
    assert_dtype(masked, dtype)
    masked = as_float64(masked).reshape(v.shape)
    v = quantized(v, dtype)
    lengths = np.linalg.norm(v, axis=-1)
    for b in range(batch_size):
        # The capsules this output keeps; ties and rounding may pick any.
        kept = [
            k
            for k in range(num_capsules)
            if np.array_equal(masked[b], v[b] * np.eye(num_capsules)[k][:, None])
        ]
        assert kept, f"sample {b} is not one capsule of its input, masked"
        np.testing.assert_allclose(
            lengths[b, kept].max(), lengths[b].max(), **TOLERANCES[dtype]
        )


@settings(PROFILE, max_examples=cases())
@given(case=primary_caps_cases(), seed=seeds(), dtype=dtypes())
def test_primary_caps_matches_reference(case, seed, dtype):
    arguments, x = case
    layer = PrimaryCaps(
        **arguments,
        kernel_initializer=keras.initializers.RandomNormal(stddev=0.5, seed=seed),
        bias_initializer=keras.initializers.RandomNormal(stddev=0.5, seed=seed + 1),
        dtype=POLICIES[dtype],
    )
    # oneDNN, the CPU convolution of torch (2.13) and tensorflow (2.21),
    # convolves one input channel with strides (1, 2 or more) wrongly, with
    # or without this library (torch: heap garbage; tensorflow: wrong values
    # from tf.nn.conv2d itself); jax on CPU convolves without it.
    strides = layer.conv.strides
    assume(
        keras.backend.backend() == "jax"
        or x.shape[-1] > 1
        or strides[0] > 1
        or strides[1] == 1
    )
    u = layer(x)
    assert_dtype(u, dtype)
    conv = ref.conv2d(
        quantized(x, dtype),
        quantized(layer.conv.kernel.value, dtype),
        quantized(layer.conv.bias.value, dtype),
        layer.conv.strides,
        arguments["padding"],
    )  # (batch_size, H', W', capsule_types * capsule_dim)
    expected = ref.squash(conv.reshape(len(x), -1, arguments["capsule_dim"]))
    assert tuple(u.shape) == expected.shape
    assert_close(u, expected, dtype)


@settings(PROFILE, max_examples=cases(20))
@given(
    arguments=digit_caps_arguments(),
    u_shape=st.tuples(batch_sizes(), capsule_counts(), capsule_dims()),
    seed=seeds(),
    dtype=dtypes(),
)
def test_digit_caps_matches_reference(arguments, u_shape, seed, dtype):
    layer = DigitCaps(
        **arguments,
        kernel_initializer=keras.initializers.RandomNormal(stddev=0.3, seed=seed),
        return_coupling=True,
        dtype=POLICIES[dtype],
    )
    layer.build((None, *u_shape[1:]))
    u = gaussian(seed, u_shape).astype("float32")
    routing, iterations = arguments["routing"], layer.routing_iterations
    if arguments["routing_iterations"] is None:
        assert iterations == ROUTING_ITERATIONS[routing]
    num_capsules, dim = arguments["num_capsules"], arguments["capsule_dim"]
    # The routing's own weights, drawn instead of their ones and zeros.
    if routing == "self_attention":
        layer.priors.assign(gaussian(seed, (u_shape[1], num_capsules), 0.1))
    if routing == "inverted_dot_product":
        layer.pose_scale.assign(gaussian(seed, dim, 0.2, mean=1.0))
        layer.pose_offset.assign(gaussian(seed + 1, dim, 0.2))
    v, c = layer(u)
    assert_dtype(v, dtype)
    u_hat = ref.votes(quantized(layer.kernel.value, dtype), quantized(u, dtype))
    squash_fn = REFERENCE_SQUASHES[arguments["squash"]]
    if routing == "dynamic":
        v_ref, c_ref = ref.routing(u_hat, iterations, squash_fn=squash_fn)
    elif routing == "self_attention":
        priors = numpy(layer.priors.value)
        v_ref, c_ref = ref.self_attention_routing(u_hat, priors, squash_fn)
    else:
        v_ref, c_ref = ref.inverted_dot_product_routing(
            u_hat,
            iterations,
            numpy(layer.pose_scale.value),
            numpy(layer.pose_offset.value),
            arguments["scale_agreement"],
            squash_fn,
        )
    assert_close(v, v_ref, dtype)
    assert_close(c, c_ref, dtype)


# --- Routing functions --------------------------------------------------------


@settings(PROFILE, max_examples=cases())
@given(
    u_hat=votes(),
    iterations=iteration_counts(),
    stop_gradient_votes=st.booleans(),
    return_coupling=st.booleans(),
    variant=squash_variants(),
    dtype=dtypes(),
)
def test_dynamic_routing_matches_reference(
    u_hat, iterations, stop_gradient_votes, return_coupling, variant, dtype
):
    routed = dynamic_routing(
        ops.cast(u_hat, dtype),
        iterations=iterations,
        stop_gradient_votes=stop_gradient_votes,
        return_coupling=return_coupling,
        squash_fn=SQUASHES[variant],
    )
    v_ref, c_ref = ref.routing(
        quantized(u_hat, dtype), iterations, squash_fn=REFERENCE_SQUASHES[variant]
    )
    v = routed[0] if return_coupling else routed
    assert_dtype(v, dtype)
    assert_close(v, v_ref, dtype)
    if return_coupling:
        assert_close(routed[1], c_ref, dtype)


@settings(PROFILE, max_examples=cases())
@given(
    u_hat=votes(),
    priors_seed=st.none() | seeds(),
    variant=squash_variants(),
    dtype=dtypes(),
)
def test_self_attention_routing_matches_reference(u_hat, priors_seed, variant, dtype):
    priors = None
    if priors_seed is not None:
        priors = gaussian(priors_seed, u_hat.shape[1:3], 0.1).astype("float32")
    v, c = self_attention_routing(
        ops.cast(u_hat, dtype),
        priors,
        return_coupling=True,
        squash_fn=SQUASHES[variant],
    )
    assert_dtype(v, dtype)
    v_ref, c_ref = ref.self_attention_routing(
        quantized(u_hat, dtype), priors, REFERENCE_SQUASHES[variant]
    )
    assert_close(v, v_ref, dtype)
    assert_close(c, c_ref, dtype)


@settings(PROFILE, max_examples=cases())
@given(
    u_hat=votes(),
    iterations=iteration_counts(),
    norm_seed=st.none() | seeds(),
    scale_agreement=st.booleans(),
    variant=squash_variants(),
    dtype=dtypes(),
)
def test_inverted_dot_product_routing_matches_reference(
    u_hat, iterations, norm_seed, scale_agreement, variant, dtype
):
    dim = u_hat.shape[-1]
    scale, offset = None, None  # LayerNorm without a gain and a bias
    if norm_seed is not None:
        scale = gaussian(norm_seed, dim, 0.2, mean=1.0).astype("float32")
        offset = gaussian(norm_seed + 1, dim, 0.2).astype("float32")
    v, c = inverted_dot_product_routing(
        ops.cast(u_hat, dtype),
        iterations,
        scale,
        offset,
        return_coupling=True,
        squash_fn=SQUASHES[variant],
        scale_agreement=scale_agreement,
    )
    assert_dtype(v, dtype)
    v_ref, c_ref = ref.inverted_dot_product_routing(
        quantized(u_hat, dtype),
        iterations,
        1.0 if scale is None else scale,
        0.0 if offset is None else offset,
        scale_agreement,
        REFERENCE_SQUASHES[variant],
    )
    assert_close(v, v_ref, dtype)
    assert_close(c, c_ref, dtype)


@settings(PROFILE, max_examples=cases(20))
@given(
    em_votes=votes(dim=16),
    activation_seed=seeds(),
    beta_seed=seeds(),
    per_parent=st.booleans(),
    iterations=iteration_counts(),
    inverse_temperature=st.floats(0.1, 5.0),
    epsilon=st.sampled_from((1e-4, 1e-3, 1e-2)),
    dtype=dtypes(),
)
def test_em_routing_matches_reference(
    em_votes,
    activation_seed,
    beta_seed,
    per_parent,
    iterations,
    inverse_temperature,
    epsilon,
    dtype,
):
    batch_size, in_capsules, out_capsules, _ = em_votes.shape
    # Not votes alike for every parent (all zeros, say): then the parents'
    # costs tie exactly, and standardising them over the parents divides
    # float32's rounding of the costs by their (epsilon-sized) spread.
    assume(out_capsules == 1 or np.ptp(em_votes, axis=2).max() > 0)
    # Children active enough that the reference's densities do not underflow.
    rng = np.random.default_rng(activation_seed)
    activations = rng.uniform(0.05, 1.0, (batch_size, in_capsules)).astype("float32")
    beta_shape = (out_capsules,) if per_parent else ()
    beta_u, beta_a = gaussian(beta_seed, (2, *beta_shape)).astype("float32")
    mu, a, r = em_routing(
        ops.cast(em_votes, dtype),
        activations,
        beta_u,
        beta_a,
        iterations,
        inverse_temperature,
        epsilon,
        return_assignments=True,
    )
    assert_dtype(mu, dtype)
    assert_dtype(a, dtype)
    arguments = (activations, beta_u, beta_a, iterations, inverse_temperature, epsilon)
    votes_in = quantized(em_votes, dtype)
    expected = ref.em_routing(votes_in, *arguments)
    # EM routing divides each parent's cost by the spread of all the parents'
    # costs. Where the costs almost agree it amplifies any rounding, and
    # float32 parts from float64 (one child, two parents, votes ~1e-3, three
    # iterations: activations 0.467 and 0.467 in float32, 0.462 and 0.472 in
    # float64). So the tolerance adds ten times how far the reference itself
    # moves when the votes move by the dtype's rounding (of at least 1e-3 of
    # a vote, so that all-zero votes, where every parent ties, move too).
    rounding = ml_dtypes.finfo(NUMPY_DTYPES[dtype]).eps
    noise = rounding * np.random.default_rng(0).standard_normal(votes_in.shape)
    nudge = noise * np.maximum(np.abs(votes_in), 1e-3)
    nudged = ref.em_routing(votes_in + nudge, *arguments)
    # In float32 the standardisation of the costs over the parents amplifies
    # their rounding too (two parents a few 0.1 apart: activations 3e-5
    # apart), beyond the 1e-5 of the other routings.
    tolerance = EM_FLOAT32 if dtype == "float32" else TOLERANCES[dtype]
    for actual, exact, moved in zip((mu, a, r), expected, nudged, strict=True):
        bound = tolerance["atol"] + tolerance["rtol"] * np.abs(exact)
        np.testing.assert_array_less(
            np.abs(as_float64(actual) - exact), bound + 10 * np.abs(exact - moved)
        )


# --- Bad arguments ------------------------------------------------------------


def not_positive_integers():
    """Zero, negatives, floats (2.0 too), bools, strings and None."""
    return st.one_of(
        st.integers(max_value=0),
        st.floats(),
        st.booleans(),
        st.text(max_size=3),
        st.none(),
    )


def not_positive_numbers():
    """Zero, negatives, NaN, bools, strings and None."""
    return st.one_of(
        st.integers(max_value=0),
        st.floats(max_value=0.0),
        st.just(math.nan),
        st.booleans(),
        st.text(max_size=3),
        st.none(),
    )


def not_integers():
    return st.one_of(st.floats(), st.booleans(), st.text(max_size=3), st.none())


def not_axes_of_rank(rank):
    """Not integers, or integers outside [-rank, rank)."""
    return not_integers() | st.integers(max_value=-rank - 1) | st.integers(rank)


def not_positive_integer_pairs():
    """Bad `kernel_size`/`strides`: a bad value alone or in a pair, or a
    sequence of another length."""
    good, bad = st.integers(1, 5), not_positive_integers()
    return st.one_of(
        bad,
        st.tuples(bad, good),
        st.tuples(good, bad),
        st.lists(good, min_size=1, max_size=1),
        st.tuples(good, good, good),
    )


def not_names_in(names):
    """Values other than the strings `names` (in any case)."""
    values = st.one_of(
        st.text(max_size=12), st.integers(), st.floats(), st.booleans(), st.none()
    )
    return values.filter(lambda v: not isinstance(v, str) or v.lower() not in names)


def received(name, value):
    """The end of a Keras-style error message: `Received: name=value`."""
    return f"Received: .*{re.escape(f'{name}={value!r}')}"


#: Each constructor argument, and what its check must refuse.
BAD_LAYER_ARGUMENTS = {
    "Squash-axis": (Squash, "axis", not_integers()),
    "Squash-epsilon": (Squash, "epsilon", not_positive_numbers()),
    "Squash-squash": (Squash, "squash", not_names_in(SQUASHES)),
    "Length-epsilon": (Length, "epsilon", not_positive_numbers()),
    "PrimaryCaps-capsule_types": (
        PrimaryCaps,
        "capsule_types",
        not_positive_integers(),
    ),
    "PrimaryCaps-capsule_dim": (PrimaryCaps, "capsule_dim", not_positive_integers()),
    "PrimaryCaps-kernel_size": (
        PrimaryCaps,
        "kernel_size",
        not_positive_integer_pairs(),
    ),
    "PrimaryCaps-strides": (PrimaryCaps, "strides", not_positive_integer_pairs()),
    "PrimaryCaps-padding": (PrimaryCaps, "padding", not_names_in(("valid", "same"))),
    "DigitCaps-num_capsules": (DigitCaps, "num_capsules", not_positive_integers()),
    "DigitCaps-capsule_dim": (DigitCaps, "capsule_dim", not_positive_integers()),
    "DigitCaps-routing_iterations": (
        DigitCaps,
        "routing_iterations",
        not_positive_integers().filter(lambda v: v is not None),  # None: default
    ),
    "DigitCaps-self_attention-routing_iterations": (
        functools.partial(DigitCaps, routing="self_attention"),
        "routing_iterations",
        st.integers(min_value=2),  # one pass
    ),
    "DigitCaps-routing": (DigitCaps, "routing", not_names_in(ROUTING_ITERATIONS)),
    "DigitCaps-squash": (DigitCaps, "squash", not_names_in(SQUASHES)),
}


@pytest.mark.parametrize("key", sorted(BAD_LAYER_ARGUMENTS))
@PROFILE
@given(data=st.data())
def test_layers_refuse_bad_arguments(key, data):
    layer, name, bad_values = BAD_LAYER_ARGUMENTS[key]
    value = data.draw(bad_values, label=name)
    with pytest.raises(ValueError, match=received(name, value)):
        layer(**{name: value})


S = np.ones((2, 3, 4), "float32")
U_HAT = np.ones((2, 3, 4, 5), "float32")
EM_VOTES, EM_ACTIVATIONS = np.ones((2, 3, 4, 16), "float32"), np.ones((2, 3), "float32")

#: Each function argument (with valid other arguments), and what it must refuse.
BAD_FUNCTION_ARGUMENTS = {
    **{
        f"{fn.__name__}-{name}": (functools.partial(fn, S), name, bad_values)
        for fn in (squash, exponential_squash, safe_norm)
        for name, bad_values in (
            ("axis", not_axes_of_rank(S.ndim)),
            ("epsilon", not_positive_numbers()),
        )
    },
    "dynamic_routing-iterations": (
        functools.partial(dynamic_routing, U_HAT),
        "iterations",
        not_positive_integers(),
    ),
    "inverted_dot_product_routing-iterations": (
        functools.partial(inverted_dot_product_routing, U_HAT),
        "iterations",
        not_positive_integers(),
    ),
    **{
        f"em_routing-{name}": (
            functools.partial(em_routing, EM_VOTES, EM_ACTIVATIONS, 0.0, 0.0),
            name,
            bad_values,
        )
        for name, bad_values in (
            ("iterations", not_positive_integers()),
            ("inverse_temperature", not_positive_numbers()),
            ("epsilon", not_positive_numbers()),
        )
    },
}


@pytest.mark.parametrize("key", sorted(BAD_FUNCTION_ARGUMENTS))
@PROFILE
@given(data=st.data())
def test_functions_refuse_bad_arguments(key, data):
    fn, name, bad_values = BAD_FUNCTION_ARGUMENTS[key]
    value = data.draw(bad_values, label=name)
    with pytest.raises(ValueError, match=received(name, value)):
        fn(**{name: value})


#: Each layer and routing function: a call on one input, whether it takes an
#: input of that rank, and the name its error gives the input's shape.
INPUT_RANKS = {
    "PrimaryCaps": (
        lambda x: PrimaryCaps(2, 3, kernel_size=1)(x),
        lambda rank: rank == 4,
        "input_shape",
    ),
    "DigitCaps": (lambda x: DigitCaps(2, 3)(x), lambda rank: rank == 3, "input_shape"),
    "Length": (lambda x: Length()(x), lambda rank: rank >= 2, "input_shape"),
    "Mask": (lambda x: Mask()(x), lambda rank: rank == 3, "input_shape"),
    "Mask-with-labels": (
        lambda x: Mask()([x, np.zeros(len(x), "int32")]),
        lambda rank: rank == 3,
        "input_shape",
    ),
    "dynamic_routing": (dynamic_routing, lambda rank: rank == 4, "u_hat.shape"),
    "self_attention_routing": (
        self_attention_routing,
        lambda rank: rank == 4,
        "u_hat.shape",
    ),
    "inverted_dot_product_routing": (
        inverted_dot_product_routing,
        lambda rank: rank == 4,
        "u_hat.shape",
    ),
    "em_routing": (
        lambda votes: em_routing(votes, EM_ACTIVATIONS, 0.0, 0.0),
        lambda rank: rank == 4,
        "votes.shape",
    ),
}


@pytest.mark.parametrize("key", sorted(INPUT_RANKS))
@PROFILE
@given(data=st.data())
def test_inputs_of_a_wrong_rank_are_refused(key, data):
    call, takes, name = INPUT_RANKS[key]
    rank = data.draw(st.sampled_from([r for r in range(1, 6) if not takes(r)]))
    shape = tuple(data.draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank)))
    with pytest.raises(ValueError, match=received(name, shape)):
        call(np.ones(shape, "float32"))


@PROFILE
@given(case=tensors_and_axes(), offset=st.integers(0, 3), sign=st.sampled_from((1, -1)))
def test_squash_layer_refuses_an_axis_the_input_lacks(case, offset, sign):
    s, _ = case
    axis = s.ndim + offset if sign > 0 else -s.ndim - 1 - offset
    with pytest.raises(ValueError, match=received("axis", axis)):
        Squash(axis=axis)(s)


@PROFILE
@given(shape=st.lists(st.integers(1, 5), max_size=3).map(tuple))
def test_self_attention_routing_refuses_priors_of_another_shape(shape):
    if shape == U_HAT.shape[1:3]:
        shape = (*shape, 1)
    with pytest.raises(ValueError, match=received("priors.shape", shape)):
        self_attention_routing(U_HAT, np.zeros(shape, "float32"))
