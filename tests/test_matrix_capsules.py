"""Matrix capsules with EM routing (Hinton et al. 2018) against NumPy references.

EM routing and the three layers equal loop-by-loop references, stay finite
(values and gradients) for many iterations and all-zero inputs, route in
float32 under reduced precision, refuse bad arguments, serialize; the spread
loss and its margin schedule; MatrixCapsNet trains, saves and loads
(on the other backends: test_saving_across_backends.py).
"""

import authors_reference as authors
import keras
import numpy as np
import numpy_reference as ref
import pytest
from conftest import TOLERANCE, central_differences, gradient, numpy, random
from keras import ops
from layer_checks import check_layer

from capsules_keras import (
    ClassMatrixCaps,
    ConvMatrixCaps,
    MatrixCapsNet,
    PrimaryMatrixCaps,
    SpreadLoss,
    SpreadMarginSchedule,
    em_routing,
    spread_loss,
)
from capsules_keras.routing.em import route_parent_major


def uniform(*shape, seed=0):
    return np.random.default_rng(seed).uniform(0.05, 1.0, shape).astype("float32")


def capsule_grid(batch, height, width, types, seed=0):
    """Random matrix capsules `(batch, height, width, types, 17)`."""
    poses = random(batch, height, width, types, 16, seed=seed)
    activations = uniform(batch, height, width, types, 1, seed=seed + 1)
    return np.concatenate([poses, activations], axis=-1)


@pytest.mark.parametrize("iterations", [1, 2, 3])
def test_em_routing_matches_reference(iterations):
    votes = random(2, 6, 3, 16, seed=1)  # 6 children, 3 parents
    activations = uniform(2, 6, seed=2)
    beta_u, beta_a = random(3, seed=3), random(3, seed=4)
    mu, a, r = em_routing(
        votes, activations, beta_u, beta_a, iterations, 1.5, return_assignments=True
    )
    mu_ref, a_ref, r_ref = ref.em_routing(
        votes, activations, beta_u, beta_a, iterations, 1.5, 1e-4
    )
    np.testing.assert_allclose(numpy(mu), mu_ref, **TOLERANCE)
    np.testing.assert_allclose(numpy(a), a_ref, **TOLERANCE)
    np.testing.assert_allclose(numpy(r), r_ref, **TOLERANCE)
    np.testing.assert_allclose(numpy(r).sum(-1), 1.0, atol=1e-6)
    if iterations > 1:  # the E-step moved the assignments away from uniform
        assert np.abs(numpy(r) - 1 / 3).max() > 1e-2


def test_parent_major_routing_takes_numpy_arrays_as_em_routing_does():
    votes = random(2, 3, 6, 16, seed=1)  # parent-major: 3 parents, 6 children
    activations = uniform(2, 6, seed=2)
    routed = route_parent_major(votes, activations, 0.5, -0.5, 2, 1.5, 1e-4)
    expected = em_routing(np.swapaxes(votes, 1, 2), activations, 0.5, -0.5, 2, 1.5)
    for value, reference in zip(routed, expected, strict=True):
        np.testing.assert_allclose(numpy(value), numpy(reference), atol=1e-6)


@pytest.mark.parametrize("iterations", [1, 3])
def test_em_routing_gradients_match_the_references_derivative(iterations):
    """The hand-written gradient of the M-step's sums (`em._moments`)
    against central differences of the float64 NumPy reference."""
    votes = random(2, 5, 3, 16, seed=12)  # 5 children, 3 parents
    activations = uniform(2, 5, seed=13)
    beta_u, beta_a = random(3, seed=14), random(3, seed=15)
    pose_weights, activation_weights = random(2, 3, 16, seed=16), random(2, 3, seed=17)

    def route(v, a):  # summed by `gradient`: one number that every output moves
        mu, a_out = em_routing(v, a, beta_u, beta_a, iterations, 1.5)
        return ops.sum(mu * ops.convert_to_tensor(pose_weights), axis=-1) + (
            a_out * ops.convert_to_tensor(activation_weights)
        )

    def reference(v, a):
        mu, a_out, _ = ref.em_routing(v, a, beta_u, beta_a, iterations, 1.5, 1e-4)
        return (mu * pose_weights).sum() + (a_out * activation_weights).sum()

    np.testing.assert_allclose(
        gradient(lambda v: route(v, ops.convert_to_tensor(activations)), votes),
        central_differences(lambda v: reference(v, activations), votes),
        rtol=1e-3,
        atol=1e-4,
    )
    np.testing.assert_allclose(
        gradient(lambda a: route(ops.convert_to_tensor(votes), a), activations),
        central_differences(lambda a: reference(votes, a), activations),
        rtol=1e-3,
        atol=1e-4,
    )


@pytest.mark.parametrize("iterations", [1, 2, 3])
def test_em_routing_matches_ibms_code_with_our_two_departures(iterations):
    """Against IBM's EM routing: equal once our documented departures are applied.

    Ours standardises the cost over the parents (their code has it commented
    out) and ramps the inverse temperature linearly to `inverse_temperature`
    (theirs: `0.01 (1 - 0.95^t)`); with both, the two agree. Without them
    the activations differ: the departures are real, and documented in
    `em_routing`'s docstring.
    """
    votes = random(3, 12, 5, 16, seed=30)  # 12 children, 5 parents
    activations = uniform(3, 12, seed=31)
    beta_u, beta_a = random(5, seed=32), random(5, seed=33)
    epsilon = authors.GRITZMAN_EPSILON
    mu, a = em_routing(votes, activations, beta_u, beta_a, iterations, 1.0, epsilon)
    ramp = [t / iterations for t in range(1, iterations + 1)]
    mu_theirs, a_theirs = authors.gritzman_em_routing(
        votes, activations, beta_u, beta_a, ramp, standardise_cost=True
    )
    np.testing.assert_allclose(numpy(mu), mu_theirs, **TOLERANCE)
    np.testing.assert_allclose(numpy(a), a_theirs, **TOLERANCE)
    _, a_raw = authors.gritzman_em_routing(
        votes, activations, beta_u, beta_a, authors.gritzman_lambdas(iterations)
    )
    assert np.abs(numpy(a) - a_raw).max() > 0.05


def test_conv_matrix_caps_matches_reference():
    x = capsule_grid(2, 5, 4, 2, seed=5)
    layer = ConvMatrixCaps(3, kernel_size=2, strides=2, inverse_temperature=2.0)
    out = numpy(layer(x))
    assert out.shape == (2, 2, 2, 3, 17)
    layer.beta_u.assign(random(3, seed=6))
    layer.beta_a.assign(random(3, seed=7))
    out = numpy(layer(x))
    kernel = numpy(layer.kernel).astype("float64").reshape(8, 3, 4, 4)
    for row in range(2):
        for col in range(2):
            # children in (dy, dx, type) order
            window = x[:, 2 * row : 2 * row + 2, 2 * col : 2 * col + 2]
            children = window.reshape(2, 8, 17)
            votes = ref.matrix_votes(children[..., :16], kernel)
            mu, a, _ = ref.em_routing(
                votes,
                children[..., 16],
                numpy(layer.beta_u),
                numpy(layer.beta_a),
                3,
                2.0,
                1e-4,
            )
            np.testing.assert_allclose(out[:, row, col, :, :16], mu, **TOLERANCE)
            np.testing.assert_allclose(out[:, row, col, :, 16], a, **TOLERANCE)


@pytest.mark.parametrize("coordinate_addition", [True, False])
def test_class_matrix_caps_matches_reference(coordinate_addition):
    x = capsule_grid(2, 2, 3, 2, seed=8)
    layer = ClassMatrixCaps(4, coordinate_addition=coordinate_addition)
    out = numpy(layer(x))
    kernel = numpy(layer.kernel).astype("float64")  # (types, classes, 4, 4)
    children = x.reshape(2, 12, 17)  # (row, col, type) order
    votes = ref.matrix_votes(children[..., :16], np.tile(kernel, (6, 1, 1, 1)))
    if coordinate_addition:
        for i in range(12):
            row, col = divmod(i // 2, 3)
            votes[:, i, :, 3] += (row + 0.5) / 2  # V[0, 3]: the scaled row
            votes[:, i, :, 7] += (col + 0.5) / 3  # V[1, 3]: the scaled column
    mu, a, r = ref.em_routing(votes, children[..., 16], 0.0, 0.0, 3, 1.0, 1e-4)
    np.testing.assert_allclose(out[..., :16], mu, **TOLERANCE)
    np.testing.assert_allclose(out[..., 16], a, **TOLERANCE)
    # route(): the same capsules and the assignments R; any iteration count.
    capsules, assignments = layer.route(x)
    np.testing.assert_allclose(numpy(capsules), out, **TOLERANCE)
    np.testing.assert_allclose(numpy(assignments), r, **TOLERANCE)
    mu, a, r = ref.em_routing(votes, children[..., 16], 0.0, 0.0, 2, 1.0, 1e-4)
    capsules, assignments = layer.route(x, routing_iterations=2)
    np.testing.assert_allclose(numpy(capsules)[..., :16], mu, **TOLERANCE)
    np.testing.assert_allclose(numpy(assignments), r, **TOLERANCE)
    with pytest.raises(ValueError, match="iterations"):
        layer.route(x, routing_iterations=0)


@pytest.mark.parametrize("kind", ["random", "large", "zeros"])
def test_em_routing_values_and_gradients_are_finite(kind):
    votes = {
        "random": random(2, 9, 4, 16, seed=9),
        "large": random(2, 9, 4, 16, scale=50.0, seed=9),
        "zeros": np.zeros((2, 9, 4, 16), "float32"),
    }[kind]
    activations = np.zeros((2, 9), "float32") if kind == "zeros" else uniform(2, 9)
    beta_u, beta_a = random(4, seed=10), random(4, seed=11)

    def route(v, a):
        mu, a_out = em_routing(v, a, beta_u, beta_a, iterations=5)
        return ops.sum(mu, axis=-1) + a_out

    assert np.all(np.isfinite(numpy(route(votes, activations))))
    assert np.all(np.isfinite(gradient(lambda v: route(v, activations), votes)))
    assert np.all(np.isfinite(gradient(lambda a: route(votes, a), activations)))


def test_layers_are_finite_for_all_zero_inputs(backend):
    stack = [ConvMatrixCaps(3, 2), ClassMatrixCaps(4)]

    def forward(x):
        for layer in stack:
            x = layer(x)
        return x

    zeros = np.zeros((2, 3, 3, 2, 17), "float32")
    assert np.all(np.isfinite(numpy(forward(zeros))))
    if backend == "jax":  # one compiled gradient, not hundreds of eager ops
        import jax

        forward = jax.jit(forward)
    assert np.all(np.isfinite(gradient(forward, zeros)))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_reduced_precision_routes_in_float32(dtype):
    votes, activations = random(2, 9, 4, 16, seed=12), uniform(2, 9, seed=13)
    mu, a = em_routing(votes, activations, 0.0, 0.0)
    mu_low, a_low = em_routing(ops.cast(votes, dtype), activations, 0.0, 0.0)
    assert keras.backend.standardize_dtype(mu_low.dtype) == dtype
    assert keras.backend.standardize_dtype(a_low.dtype) == dtype
    np.testing.assert_allclose(numpy(ops.cast(mu_low, "float32")), numpy(mu), atol=3e-2)
    np.testing.assert_allclose(numpy(ops.cast(a_low, "float32")), numpy(a), atol=3e-2)
    layer = ConvMatrixCaps(3, 2, dtype=f"mixed_{dtype}")
    out = layer(capsule_grid(2, 3, 3, 2))
    assert keras.backend.standardize_dtype(out.dtype) == dtype
    assert np.all(np.isfinite(numpy(ops.cast(out, "float32"))))


def test_bad_arguments_and_shapes_are_refused():
    votes, activations = random(2, 6, 3, 16), uniform(2, 6)
    cases = [
        (lambda: em_routing(votes[..., :9], activations, 0, 0), r"votes.shape=\("),
        (lambda: em_routing(votes, activations[:, :5], 0, 0), "activations.shape"),
        (lambda: em_routing(votes, activations, np.zeros(4), 0), "beta_u.shape"),
        (lambda: em_routing(votes, activations, 0, np.zeros((3, 1))), "beta_a.shape"),
        (lambda: em_routing(votes, activations, 0, 0, 0), "iterations=0"),
        (
            lambda: em_routing(votes, activations, 0, 0, inverse_temperature=-1.0),
            "inverse_temperature=-1.0",
        ),
        (lambda: ConvMatrixCaps(0), "capsule_types=0"),
        (lambda: ConvMatrixCaps(4, kernel_size=2.5), "kernel_size=2.5"),
        (lambda: ConvMatrixCaps(4, routing_iterations=0), "routing_iterations=0"),
        (lambda: ClassMatrixCaps(4, epsilon=0), "epsilon=0"),
        (lambda: PrimaryMatrixCaps(-2), "capsule_types=-2"),
        (lambda: SpreadLoss(margin=1.5), "margin=1.5"),
        (lambda: SpreadMarginSchedule(start=0.9, stop=0.2), "start=0.9"),
        (lambda: MatrixCapsNet(capsule_types=(8, 16)), r"capsule_types=\(8, 16\)"),
        (lambda: MatrixCapsNet(image_shape=(12, 12, 1)), "too small"),
        (lambda: MatrixCapsNet(image_shape=(28, 28)), "image_shape"),
    ]
    for make, message in cases:
        with pytest.raises(ValueError, match=message):
            make()
    with pytest.raises(ValueError, match=r"input_shape=\(2, 3, 3, 2, 16\)"):
        ConvMatrixCaps(4, 2)(np.zeros((2, 3, 3, 2, 16), "float32"))
    with pytest.raises(ValueError, match="does not fit"):
        ConvMatrixCaps(4, 3)(capsule_grid(1, 2, 4, 2))
    with pytest.raises(ValueError, match=r"input_shape=\(2, 6, 17\)"):
        ClassMatrixCaps(4)(np.zeros((2, 6, 17), "float32"))
    layer = ClassMatrixCaps(4)
    layer(capsule_grid(1, 2, 2, 3))
    with pytest.raises(ValueError, match="built for 3"):
        layer(capsule_grid(1, 2, 2, 5))
    with pytest.raises(ValueError, match="height, width, channels"):
        PrimaryMatrixCaps(4)(np.zeros((2, 8, 8), "float32"))


def test_layers_serialize_and_save(tmp_path):
    check_layer(
        lambda: PrimaryMatrixCaps(3, kernel_size=2),
        [random(2, 5, 5, 4)],
        (2, 4, 4, 3, 17),
        4,
        tmp_path,
    )
    check_layer(
        lambda: ConvMatrixCaps(3, 2, strides=1, inverse_temperature=0.5),
        [capsule_grid(2, 3, 3, 2)],
        (2, 2, 2, 3, 17),
        3,
        tmp_path,
    )
    check_layer(
        lambda: ClassMatrixCaps(4, coordinate_addition=False, routing_iterations=2),
        [capsule_grid(2, 2, 2, 3)],
        (2, 4, 17),
        3,
        tmp_path,
    )
    layer = PrimaryMatrixCaps(3)
    out = numpy(layer(random(2, 5, 5, 4)))
    assert np.all((out[..., 16] > 0) & (out[..., 16] < 1))  # sigmoid activations


def test_spread_loss_matches_reference_and_takes_labels_or_one_hot():
    activations = uniform(5, 4, seed=14)
    labels = np.array([0, 3, 1, 2, 3])
    onehot = np.eye(4, dtype="float32")[labels]
    for margin in (0.2, 0.9):
        expected = ref.spread_loss(onehot, activations, margin)
        for y in (labels, onehot):
            got = numpy(spread_loss(y, activations, margin))
            np.testing.assert_allclose(got, expected, **TOLERANCE)
        loss = SpreadLoss(margin=margin)
        np.testing.assert_allclose(
            float(loss(labels, activations)), expected.mean(), **TOLERANCE
        )
    config = SpreadLoss(margin=keras.Variable(0.4)).get_config()
    assert SpreadLoss.from_config(config).margin == pytest.approx(0.4)


@pytest.fixture(scope="module")
def digits(mnist_path):
    keep = np.random.default_rng(0).permutation(5000)[:48]
    with np.load(mnist_path) as data:
        return data["x_train"][keep], data["y_train"][keep]


# Small sizes and two EM iterations keep the compiled steps small.
SMALL = {"conv_filters": 8, "capsule_types": (4, 4, 4), "routing_iterations": 2}


def test_routed_layers_default_compiled_step_matches_eager():
    """The backend's default compiled step (tensorflow: a graph with each
    layer's routing XLA-compiled inside it, see `compile_routing`; jax: jit)
    predicts and trains as eager execution does."""
    x, target = capsule_grid(3, 5, 5, 2, seed=3), random(3, 4, 17, seed=4)
    models = []
    for run_eagerly in (False, True):
        keras.utils.set_random_seed(2)
        model = keras.Sequential(
            [
                keras.Input((5, 5, 2, 17)),
                ConvMatrixCaps(3, kernel_size=3, routing_iterations=2),
                ClassMatrixCaps(4, routing_iterations=2),
            ]
        )
        model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
        model.run_eagerly = run_eagerly
        models.append(model)
    before = [numpy(w) for w in models[0].weights]
    compiled, eager = (m.predict(x, verbose=0) for m in models)
    np.testing.assert_allclose(compiled, eager, **TOLERANCE)
    for model in models:
        model.train_on_batch(x, target)
    after = [[numpy(w) for w in m.weights] for m in models]
    for trained, eagerly_trained in zip(*after, strict=True):
        np.testing.assert_allclose(trained, eagerly_trained, rtol=1e-4, atol=1e-5)
    assert not all(np.allclose(a, b) for a, b in zip(after[0], before, strict=True))


def test_matrix_capsnet_trains_with_the_margin_schedule_saves_and_loads(
    digits, tmp_path
):
    x, y = digits  # uint8 (n, 28, 28), as keras.datasets gives them
    model = MatrixCapsNet(**SMALL)
    # 6,120 trainable, the batch normalisation's 16 moving statistics, the margin
    assert model.count_params() == 6_137
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    # The compiled step reads the margin variable (jax: not a baked constant).
    # Batches of 24 and analyze's of 2 throughout: on jax every new shape
    # compiles anew.
    loose = model.evaluate(x, y, batch_size=24, verbose=0)[0]
    model.spread_margin.assign(0.9)
    assert model.evaluate(x, y, batch_size=24, verbose=0)[0] > loose + 1e-3
    model.spread_margin.assign(0.2)
    history = model.fit(
        x,
        y,
        batch_size=24,
        epochs=3,
        callbacks=[SpreadMarginSchedule(step=0.05)],
        verbose=0,
    )
    assert float(numpy(model.spread_margin)) == pytest.approx(0.3)
    assert np.all(np.isfinite(history.history["loss"]))

    scores = model.predict(x[:4], verbose=0)
    assert scores.shape == (4, 10) and np.all((scores > 0) & (scores < 1))
    # Integer labels and one-hot rows give the same loss.
    outputs = {"scores": scores}  # as `call` returns them
    by_label = model.compute_loss(y=y[:4], y_pred=outputs)
    by_row = model.compute_loss(y=np.eye(10, dtype="float32")[y[:4]], y_pred=outputs)
    assert float(by_label) == pytest.approx(float(by_row), abs=1e-6)

    # analyze(): the same scores, and the class layer's assignments.
    inside = model.analyze(x[:4], batch_size=2)
    np.testing.assert_allclose(inside["activations"], scores, atol=1e-5)
    np.testing.assert_array_equal(inside["predictions"], scores.argmax(-1))
    children = 3 * 3 * 4  # the last conv-capsule layer: a 3x3 grid of 4 types
    assert inside["assignments"].shape == (4, children, 10)
    np.testing.assert_allclose(inside["assignments"].sum(-1), 1.0, atol=1e-5)
    assert inside["child_activations"].shape == (4, children)
    uniform_r = model.analyze(x[:4], batch_size=2, routing_iterations=1)
    uniform_r = uniform_r["assignments"]
    np.testing.assert_allclose(uniform_r, 0.1, atol=1e-6)

    path = str(tmp_path / "em.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, MatrixCapsNet)
    assert loaded.get_config() == model.get_config()
    for saved, restored in zip(model.get_weights(), loaded.get_weights(), strict=True):
        np.testing.assert_array_equal(restored, saved)
    with pytest.raises(ValueError, match="a model of type Sequential"):
        plain = keras.Sequential([keras.Input((7, 7, 3)), PrimaryMatrixCaps(4)])
        plain.compile(loss="mse")
        plain.fit(
            random(2, 7, 7, 3),
            np.zeros((2, 7, 7, 4, 17)),
            callbacks=[SpreadMarginSchedule()],
            verbose=0,
        )
