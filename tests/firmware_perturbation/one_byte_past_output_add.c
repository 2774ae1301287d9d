/* A deliberately wrong CMSIS-NN, for the memory-oracle test only: wraps
 * arm_elementwise_add_s8 (linked with -Wl,--wrap=arm_elementwise_add_s8), computes the
 * right outputs, then writes one byte past the end of the output. Compared with the
 * reference alone it passes; the guards around every planned buffer (and, on the host,
 * AddressSanitizer) must catch it. */
#include "arm_nnfunctions.h"

arm_cmsis_nn_status __real_arm_elementwise_add_s8(
    const int8_t *input_1_vect, const int8_t *input_2_vect, const int32_t input_1_offset,
    const int32_t input_1_mult, const int32_t input_1_shift, const int32_t input_2_offset,
    const int32_t input_2_mult, const int32_t input_2_shift, const int32_t left_shift, int8_t *output,
    const int32_t out_offset, const int32_t out_mult, const int32_t out_shift,
    const int32_t out_activation_min, const int32_t out_activation_max, const int32_t block_size);

arm_cmsis_nn_status __wrap_arm_elementwise_add_s8(
    const int8_t *input_1_vect, const int8_t *input_2_vect, const int32_t input_1_offset,
    const int32_t input_1_mult, const int32_t input_1_shift, const int32_t input_2_offset,
    const int32_t input_2_mult, const int32_t input_2_shift, const int32_t left_shift, int8_t *output,
    const int32_t out_offset, const int32_t out_mult, const int32_t out_shift,
    const int32_t out_activation_min, const int32_t out_activation_max, const int32_t block_size) {
  arm_cmsis_nn_status status = __real_arm_elementwise_add_s8(
      input_1_vect, input_2_vect, input_1_offset, input_1_mult, input_1_shift, input_2_offset,
      input_2_mult, input_2_shift, left_shift, output, out_offset, out_mult, out_shift,
      out_activation_min, out_activation_max, block_size);
  output[block_size] = (int8_t)0x5A; /* one byte past the output */
  return status;
}
