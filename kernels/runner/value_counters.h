/* Value counters: did a rounding or a clamp of CMSIS-NN change a value, and where.
 *
 * A branch count says a line ran; it cannot say that a requantize met an exact half step
 * (the rounding divide's `remainder > threshold` is taken or not, a tie looks like any other
 * value), nor anything of MVE code, which clamps and rounds without branches. A coverage
 * build on a core force-includes this header into every CMSIS-NN source (kernels/CMakeLists.txt):
 * each call of the requantize and of the MVE clamps is renamed to a wrapper that computes the
 * same value with the original function and counts, per call site (file and line), in
 * runner/value_counters.c:
 *   'R' requantize: values, rounded up (the result is above the floor of the division), exact
 *       half steps with a non-negative and with a negative dividend (the rounding midpoints)
 *   'L' vmaxq_s32(value, bound), the lower clamp: vectors, and per lane the times it raised a value
 *   'U' vminq_s32(value, bound), the upper clamp: vectors, and per lane the times it lowered one
 * An MVE tail's inactive lanes are counted too: the clamp cannot know they are not stored.
 * cortexm.testing.coverage reads them back. */
#ifndef CORTEXM_VALUE_COUNTERS_H
#define CORTEXM_VALUE_COUNTERS_H

#include "arm_nnsupportfunctions.h" /* the functions renamed below, declared under their own names */

void cortexm_count_rounding(const char* file, int line, int32_t dividend, int32_t exponent);
void cortexm_count_clamp(int kind, const char* file, int line, const int32_t* value, const int32_t* bound);
void cortexm_count_choice(int kind, const char* file, int line, int second);

/* MAX and MIN as arm_nnsupportfunctions.h defines them (the same result type), each operand
 * evaluated once (its own inline functions, above, keep the originals: not counted). */
#undef MAX
#undef MIN
#define CORTEXM_CHOICE(KIND, OP, A, B)                                      \
  ({                                                                        \
    __auto_type cortexm_a_ = (A);                                           \
    __auto_type cortexm_b_ = (B);                                           \
    cortexm_count_choice(KIND, __FILE__, __LINE__, cortexm_b_ OP cortexm_a_); \
    cortexm_a_ OP cortexm_b_ ? cortexm_a_ : cortexm_b_;                     \
  })
#define MAX(A, B) CORTEXM_CHOICE('M', >, A, B)
#define MIN(A, B) CORTEXM_CHOICE('N', <, A, B)

/* The requantize's division, as arm_nn_requantize computes it (no single rounding, no assembly). */
static inline void cortexm_count_requantize(const char* file, int line, int32_t val, int32_t multiplier, int32_t shift) {
  cortexm_count_rounding(file, line, arm_nn_doubling_high_mult_no_sat(val * (1 << LEFT_SHIFT(shift)), multiplier),
                         RIGHT_SHIFT(shift));
}

static inline int32_t cortexm_requantize(int32_t val, int32_t multiplier, int32_t shift, const char* file, int line) {
  cortexm_count_requantize(file, line, val, multiplier, shift);
  return (arm_nn_requantize)(val, multiplier, shift);
}
#define arm_nn_requantize(val, multiplier, shift) cortexm_requantize((val), (multiplier), (shift), __FILE__, __LINE__)

#if defined(ARM_MATH_MVEI)
static inline int32x4_t cortexm_requantize_mve(int32x4_t val, int32_t multiplier, int32_t shift, const char* file,
                                               int line) {
  int32_t v[4];
  vst1q_s32(v, val);
  for (int k = 0; k < 4; k++) {
    cortexm_count_requantize(file, line, v[k], multiplier, shift);
  }
  return (arm_requantize_mve)(val, multiplier, shift);
}
#define arm_requantize_mve(val, multiplier, shift) \
  cortexm_requantize_mve((val), (multiplier), (shift), __FILE__, __LINE__)

static inline int32x4_t cortexm_requantize_mve_32x4(int32x4_t val, int32x4_t multiplier, int32x4_t shift,
                                                    const char* file, int line) {
  int32_t v[4], m[4], s[4];
  vst1q_s32(v, val);
  vst1q_s32(m, multiplier);
  vst1q_s32(s, shift);
  for (int k = 0; k < 4; k++) {
    cortexm_count_requantize(file, line, v[k], m[k], s[k]);
  }
  return (arm_requantize_mve_32x4)(val, multiplier, shift);
}
#define arm_requantize_mve_32x4(val, multiplier, shift) \
  cortexm_requantize_mve_32x4((val), (multiplier), (shift), __FILE__, __LINE__)

static inline int32x4_t cortexm_clamp_mve(int kind, int32x4_t value, int32x4_t bound, const char* file, int line) {
  int32_t v[4], b[4];
  vst1q_s32(v, value);
  vst1q_s32(b, bound);
  cortexm_count_clamp(kind, file, line, v, b);
  return kind == 'L' ? __arm_vmaxq_s32(value, bound) : __arm_vminq_s32(value, bound);
}
#undef vmaxq_s32
#undef vminq_s32
#define vmaxq_s32(value, bound) cortexm_clamp_mve('L', (value), (bound), __FILE__, __LINE__)
#define vminq_s32(value, bound) cortexm_clamp_mve('U', (value), (bound), __FILE__, __LINE__)
#endif

#endif
