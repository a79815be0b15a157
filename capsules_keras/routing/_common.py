"""What the routing algorithms share: the votes' check and two contractions."""

from keras import ops

from capsules_keras.ops import float32_if_reduced


def check_votes(u_hat):
    """`u_hat` as a tensor; raises unless it is `(batch, in, out, out_dim)`."""
    u_hat = ops.convert_to_tensor(u_hat)
    if len(u_hat.shape) != 4:
        raise ValueError(
            "`u_hat` must have rank 4: (batch_size, in_capsules, out_capsules, "
            f"out_dim). Received: u_hat.shape={tuple(u_hat.shape)}"
        )
    return u_hat


def route_with(u_hat, c):
    """s[b,j,m] = sum_i c[b,i,j] u_hat[b,i,j,m], in the votes' dtype."""
    return ops.einsum("bij,bijm->bjm", ops.cast(c, u_hat.dtype), u_hat)


def agreement(u_hat, poses):
    """a[b,i,j] = sum_m u_hat[b,i,j,m] poses[b,j,m], in float32."""
    return ops.einsum(
        "bijm,bjm->bij", float32_if_reduced(u_hat), float32_if_reduced(poses)
    )
