"""CMSIS-NN's integer primitives, one function per C function or macro, in numpy.

What enters: integers (Python ints or numpy integer arrays, broadcast together) holding
the values the C code holds in `int32_t`. What leaves: numpy int64 arrays holding the
`int32_t` result, with the C code's overflow behaviour: every `int32_t` sum, product or
shift that can overflow wraps modulo 2**32, as the Cortex-M (and the host build of
CMSIS-NN) does. The requantization is the default (double rounding) variant: the builds
ExecuTorch makes do not define CMSIS_NN_USE_SINGLE_ROUNDING, nor
CMSIS_NN_USE_REQUANTIZE_INLINE_ASSEMBLY (which computes the same values).

Source: CMSIS-NN dbf45dbf, Include/arm_nnsupportfunctions.h and
Include/Internal/arm_nn_compiler.h.
"""

from __future__ import annotations

import numpy as np

Q31_MAX = 2**31 - 1
Q31_MIN = -(2**31)


def _i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def wrap32(x) -> np.ndarray:
    """(int32_t)x: two's complement wrap to 32 bits."""
    x = _i64(x)
    return ((x + 2**31) & 0xFFFFFFFF) - 2**31


def wrap16(x) -> np.ndarray:
    """(int16_t)x: two's complement wrap to 16 bits."""
    x = _i64(x)
    return ((x + 2**15) & 0xFFFF) - 2**15


def wrap8(x) -> np.ndarray:
    """(int8_t)x: two's complement wrap to 8 bits."""
    x = _i64(x)
    return ((x + 2**7) & 0xFF) - 2**7


def trunc_div(a, b) -> np.ndarray:
    """C's `a / b` on integers: the quotient rounded toward zero."""
    a, b = _i64(a), _i64(b)
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def doubling_high_mult_no_sat(m1, m2) -> np.ndarray:
    """arm_nn_doubling_high_mult_no_sat: (m1 * m2 + 2**30) >> 31, truncated to int32."""
    return wrap32((_i64(m1) * _i64(m2) + (1 << 30)) >> 31)


def doubling_high_mult(m1, m2) -> np.ndarray:
    """arm_nn_doubling_high_mult (MUL_SAT): VQRDMULH, rounding half away from zero, saturating."""
    m1, m2 = _i64(m1), _i64(m2)
    nudge = np.where((m1 < 0) ^ (m2 < 0), 1 - (1 << 30), 1 << 30)
    total = m1 * m2 + nudge
    result = wrap32((total + ((total >> 63) & ((1 << 31) - 1))) >> 31)  # `total / (1ll << 31)`, toward zero
    return np.where((m1 == Q31_MIN) & (m2 == Q31_MIN), Q31_MAX, result)


def divide_by_power_of_two(dividend, exponent) -> np.ndarray:
    """arm_nn_divide_by_power_of_two (DIV_POW2): dividend / 2**exponent, midpoint away from zero."""
    dividend, exponent = _i64(dividend), _i64(exponent)
    if np.any((exponent < 0) | (exponent > 31)):
        raise ValueError("arm_nn_divide_by_power_of_two takes an exponent in [0, 31]")
    mask = (np.int64(1) << exponent) - 1
    remainder = mask & dividend
    result = dividend >> exponent
    threshold = (mask >> 1) + (result < 0)
    return result + (remainder > threshold)


def requantize(val, multiplier, shift) -> np.ndarray:
    """arm_nn_requantize: val * multiplier / 2**(31 - shift), the double-rounding variant."""
    shift = _i64(shift)
    left = np.maximum(shift, 0)  # LEFT_SHIFT(shift)
    right = np.maximum(-shift, 0)  # RIGHT_SHIFT(shift)
    scaled = wrap32(_i64(val) * (np.int64(1) << left))
    return divide_by_power_of_two(doubling_high_mult_no_sat(scaled, multiplier), right)


def mult_by_power_of_two(val, exp) -> np.ndarray:
    """arm_nn_mult_by_power_of_two (MUL_POW2): val * 2**exp, saturated to int32."""
    val, exp = _i64(val), _i64(exp)
    thresh = (np.int64(1) << (31 - exp)) - 1
    result = wrap32(val << exp)
    result = np.where(val > thresh, Q31_MAX, result)
    return np.where(val < -thresh, Q31_MIN, result)


_EXP_BARREL = (1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242)


def exp_on_negative_values(val) -> np.ndarray:
    """arm_nn_exp_on_negative_values (EXP_ON_NEG): exp(val) for val <= 0 in Q5.26, result in Q0.31."""
    val = _i64(val)
    mul, div = doubling_high_mult, divide_by_power_of_two
    val_mod_minus_quarter = (val & ((1 << 24) - 1)) - (1 << 24)
    remainder = wrap32(val_mod_minus_quarter - val)
    x = wrap32((val_mod_minus_quarter << 5) + (1 << 28))
    x2 = mul(x, x)
    inner = wrap32(div(mul(x2, x2), 2) + mul(x2, x))
    inner = wrap32(mul(inner, 715827883) + x2)
    result = wrap32(1895147668 + mul(1895147668, wrap32(x + div(inner, 1))))
    for shift, factor in enumerate(_EXP_BARREL, start=24):
        result = np.where((remainder & (1 << shift)) != 0, mul(result, factor), result)
    return np.where(val == 0, Q31_MAX, result)


def one_over_one_plus_x_for_x_in_0_1(val) -> np.ndarray:
    """arm_nn_one_over_one_plus_x_for_x_in_0_1 (ONE_OVER1): 1 / (1 + x) by Newton-Raphson, Q0.31."""
    mul = doubling_high_mult
    total = _i64(val) + Q31_MAX
    half_denominator = wrap32(trunc_div(total + np.where(total >= 0, 1, -1), 2))
    x = wrap32(1515870810 + mul(half_denominator, -1010580540))
    one = 1 << 29
    for _ in range(3):
        x = wrap32(x + mult_by_power_of_two(mul(x, wrap32(one - mul(half_denominator, x))), 2))
    return mult_by_power_of_two(x, 1)


def clz(val) -> np.ndarray:
    """CLZ (arm_nn_compiler.h): leading zero bits of (uint32_t)val, 32 for 0."""
    rest = _i64(val) & 0xFFFFFFFF
    length = np.zeros(rest.shape, dtype=np.int64)  # bit length, by halving
    for step in (16, 8, 4, 2, 1):
        big = rest >= (np.int64(1) << step)
        length = length + np.where(big, step, 0)
        rest = np.where(big, rest >> step, rest)
    length = length + (rest > 0)
    return 32 - length
