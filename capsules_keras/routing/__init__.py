"""The routing algorithms between capsule layers, and their registry.

One module per algorithm, each a function of the votes `u_hat[b,i,j,m]`
(`i` = child, `j` = parent capsule):

- `dynamic`: routing by agreement, Sabour et al. (2017);
- `self_attention`: Mazzia et al. (2021), Efficient-CapsNet;
- `inverted_dot_product`: Tsai et al. (2020);
- `em`: EM routing between matrix capsules, Hinton et al. (2018), used by
  the matrix-capsule layers rather than by `DigitCaps`.

`ROUTINGS` maps each name that `DigitCaps(routing=...)` accepts to a
`Routing`: the function, its default number of iterations, the weights the
layer adds for it, the layer options it takes, and its faster path from
the layer's kernel and inputs where it has one (`_fast`, tested equal to the
reference).
"""

from collections.abc import Callable
from typing import NamedTuple

from capsules_keras._checks import check_positive_int
from capsules_keras.routing._fast import fast_dynamic_routing
from capsules_keras.routing.dynamic import dynamic_routing
from capsules_keras.routing.em import em_routing
from capsules_keras.routing.inverted_dot_product import inverted_dot_product_routing
from capsules_keras.routing.self_attention import self_attention_routing


class RoutingWeight(NamedTuple):
    """A weight that a routing algorithm adds to its `DigitCaps` layer."""

    name: str  # the layer's attribute and the weight's name (saved files use it)
    argument: str  # the routing function's argument it is passed as
    # its shape from (in_capsules, num_capsules, capsule_dim)
    shape: Callable
    initializer: str


class Routing(NamedTuple):
    """A routing algorithm as `DigitCaps` uses it."""

    # function(u_hat, ..., return_coupling=..., squash_fn=...) -> v or (v, c)
    function: Callable
    iterations: int  # the default; None for an algorithm of one pass
    weights: tuple = ()  # RoutingWeight, added in this order after `kernel`
    options: tuple = ()  # layer options passed on to `function` by name
    # `function(einsum("ijnm,bin->bijm", kernel, inputs), ...)` from the
    # layer's kernel and inputs, on the path fastest on this backend, with the
    # squash by name (`routing._fast`); None where `function` is the fastest.
    fast: Callable = None


#: The paper's routing: the default of every layer and model that routes.
DEFAULT_ROUTING = "dynamic"

#: The routing algorithms of `DigitCaps(routing=...)`. Default iterations:
#: Sabour et al.'s 3; self-attention routing is one pass; 3 passes of
#: inverted dot-product attention, the uniform one and two refinements (Tsai
#: et al.'s code counts passes the same way; its default is 1 and its
#: reported runs use 1 and 2: see `inverted_dot_product_routing`).
ROUTINGS = {
    "dynamic": Routing(
        dynamic_routing,
        iterations=3,
        options=("stop_gradient_votes",),
        fast=fast_dynamic_routing,
    ),
    "self_attention": Routing(
        self_attention_routing,
        iterations=None,
        weights=(RoutingWeight("priors", "priors", lambda i, j, m: (i, j), "zeros"),),
    ),
    "inverted_dot_product": Routing(
        inverted_dot_product_routing,
        iterations=3,
        weights=(
            RoutingWeight("pose_scale", "scale", lambda i, j, m: (m,), "ones"),
            RoutingWeight("pose_offset", "offset", lambda i, j, m: (m,), "zeros"),
        ),
        options=("scale_agreement",),
    ),
}


def get_routing(routing):
    """The `Routing` named `routing`, checked."""
    if routing not in ROUTINGS:
        raise ValueError(
            f"`routing` must be one of {sorted(ROUTINGS)}. "
            f"Received: routing={routing!r}"
        )
    return ROUTINGS[routing]


def check_routing(routing, iterations=None):
    """The iteration count for `routing` (its default for None), checked."""
    default = get_routing(routing).iterations
    if iterations is None:
        return default or 1
    check_positive_int("routing_iterations", iterations)
    if default is None and iterations != 1:
        raise ValueError(
            f"{routing!r} routing is one pass, not iterative: use "
            f"routing_iterations=1 (or None). Received: routing_iterations={iterations}"
        )
    return iterations


__all__ = [
    "ROUTINGS",
    "Routing",
    "RoutingWeight",
    "check_routing",
    "dynamic_routing",
    "em_routing",
    "get_routing",
    "inverted_dot_product_routing",
    "self_attention_routing",
]
