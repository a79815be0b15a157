"""The precision a run computes in: what `--dtype-policy auto` picks, and why.

Mixed precision keeps every weight in float32 and computes the layers in a
16-bit type; the capsule layers keep in float32 what needs it (the squash's
norm, the routing logits and softmax, the lengths, the losses). Whether it
is faster depends on the backend and the hardware, so `auto` picks it only
where it was measured faster (docs/benchmarks.md, "Mixed precision on a
CPU"): torch on a CPU with bfloat16 instructions. jax on the same CPU runs
bfloat16 at half its float32 speed, so it is never picked there.
"""

import keras

from capsules_keras.training.devices import describe_devices

#: The CPU feature flags (Linux's names) of bfloat16 instructions: AVX-512
#: BF16 (e.g. AMD Zen 4, Intel Cooper Lake) and AMX (Intel Sapphire Rapids).
BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16")
#: The choices of `--dtype-policy`.
DTYPE_POLICIES = ("auto", "float32", "mixed_bfloat16", "mixed_float16")


def cpu_flags(cpuinfo="/proc/cpuinfo"):
    """The CPU's feature flags as a set, from Linux's `cpuinfo` file.

    Empty where the file cannot be read (macOS, Windows): nothing is then
    known of the CPU, and `auto` keeps float32.
    """
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def choose_dtype_policy(requested, backend=None, devices=None, flags=None):
    """The Keras dtype policy a run uses, and the reason, for the trainer's log.

    Args:
        requested: `--dtype-policy`: one of `DTYPE_POLICIES`.
        backend: A Keras backend name; the current one if None.
        devices: What the run computes on, as `describe_devices` says it
            (e.g. "cpu:0" or "gpu:0, gpu:1"); that of the current backend if
            None.
        flags: The CPU's feature flags; `cpu_flags()` if None.

    Returns:
        `(policy, reason)`, e.g. `("mixed_bfloat16", "auto: torch on a CPU
        with avx512_bf16")`.

    >>> choose_dtype_policy("auto", "jax", "cpu:0", {"avx512_bf16"})
    ('float32', 'auto: only torch is measured faster in bfloat16 on a CPU')
    >>> choose_dtype_policy("auto", "torch", "cpu:0", {"avx512_bf16"})
    ('mixed_bfloat16', 'auto: torch on a CPU with avx512_bf16')
    """
    if requested not in DTYPE_POLICIES:
        raise ValueError(
            f"`dtype_policy` must be one of {list(DTYPE_POLICIES)}. "
            f"Received: dtype_policy={requested!r}"
        )
    if requested != "auto":
        return requested, "as asked"
    backend = backend or keras.backend.backend()
    devices = describe_devices() if devices is None else devices
    if any(not device.startswith("cpu") for device in devices.split(", ")):
        return "float32", "auto: mixed precision is not measured on this device"
    if backend != "torch":
        return "float32", "auto: only torch is measured faster in bfloat16 on a CPU"
    flags = cpu_flags() if flags is None else flags
    found = [flag for flag in BFLOAT16_FLAGS if flag in flags]
    if not found:
        return "float32", "auto: this CPU has no bfloat16 instructions"
    return "mixed_bfloat16", f"auto: torch on a CPU with {found[0]}"
