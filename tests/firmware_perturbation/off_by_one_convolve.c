/* A deliberately wrong CMSIS-NN, for the cross-core test only: wraps
 * arm_convolve_wrapper_s8 (linked with -Wl,--wrap=arm_convolve_wrapper_s8) and moves
 * the first output element by one quantization step. The 1-LSB comparison with the
 * Python reference lets that through; only the cross-core check can catch it. */
#include "convolve_wrapper.h"

arm_cmsis_nn_status __wrap_arm_convolve_wrapper_s8(CONVOLVE_WRAPPER_ARGS) {
  arm_cmsis_nn_status status = __real_arm_convolve_wrapper_s8(
      ctx, conv_params, quant_params, input_dims, input_data, filter_dims, filter_data,
      bias_dims, bias_data, output_dims, output_data);
  /* Stay inside the activation range, so the error is exactly one step. */
  output_data[0] += output_data[0] < conv_params->activation.max ? 1 : -1;
  return status;
}
