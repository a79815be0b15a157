"""`--dtype-policy auto`: mixed_bfloat16 for torch on a CPU with bfloat16
instructions, float32 everywhere else, and the reason said."""

import pytest

from capsules_keras.training.precision import (
    DTYPE_POLICIES,
    choose_dtype_policy,
    cpu_flags,
)

ZEN4 = {"fpu", "avx2", "avx512f", "avx512_bf16"}
SAPPHIRE_RAPIDS = {"fpu", "avx2", "avx512f", "amx_bf16", "amx_tile"}
OLDER_XEON = {"fpu", "avx2", "avx512f", "avx512_vnni"}


@pytest.mark.parametrize("flags", [ZEN4, SAPPHIRE_RAPIDS])
def test_auto_picks_bfloat16_for_torch_on_a_cpu_that_has_it(flags):
    policy, why = choose_dtype_policy("auto", "torch", "cpu:0", flags)
    assert policy == "mixed_bfloat16"
    (flag,) = flags & {"avx512_bf16", "amx_bf16"}
    assert why == f"auto: torch on a CPU with {flag}"


@pytest.mark.parametrize(
    "backend, devices, flags, why",
    [
        ("torch", "cpu:0", OLDER_XEON, "this CPU has no bfloat16 instructions"),
        ("torch", "cpu:0", set(), "this CPU has no bfloat16 instructions"),
        ("jax", "cpu:0", ZEN4, "only torch is measured faster in bfloat16 on a CPU"),
        ("tensorflow", "cpu:0", ZEN4, "only torch is measured faster"),
        ("torch", "gpu:0", ZEN4, "not measured on this device"),
        ("jax", "cpu:0, gpu:0", ZEN4, "not measured on this device"),
    ],
)
def test_auto_keeps_float32_elsewhere_and_says_why(backend, devices, flags, why):
    policy, reason = choose_dtype_policy("auto", backend, devices, flags)
    assert policy == "float32"
    assert reason.startswith("auto: ") and why in reason


@pytest.mark.parametrize("policy", [p for p in DTYPE_POLICIES if p != "auto"])
def test_a_policy_asked_for_is_used_as_it_is(policy):
    assert choose_dtype_policy(policy, "torch", "cpu:0", ZEN4) == (policy, "as asked")


def test_an_unknown_policy_is_refused_by_name():
    with pytest.raises(ValueError, match="Received: dtype_policy='bfloat16'"):
        choose_dtype_policy("bfloat16", "torch", "cpu:0", ZEN4)


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512_bf16\n"
        "\nprocessor\t: 1\nflags\t\t: fpu avx2 avx512_bf16\n"
    )
    assert cpu_flags(cpuinfo) == {"fpu", "avx2", "avx512_bf16"}
    assert cpu_flags(tmp_path / "missing") == set()  # not Linux: nothing known
