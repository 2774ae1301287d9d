/* A slower but right CMSIS-NN, for the performance gate's test only: wraps
 * arm_convolve_wrapper_s8 (linked with -Wl,--wrap=arm_convolve_wrapper_s8) and sends the
 * pointwise convolutions its fast path takes (1x1, stride 1, no padding) to the generic
 * 1x1 kernel instead: the same outputs, more instructions. The bit-exact checks cannot see
 * it; only a comparison of instruction counts can. */
#include "convolve_wrapper.h"
#include "arm_nnsupportfunctions.h"

arm_cmsis_nn_status __wrap_arm_convolve_wrapper_s8(CONVOLVE_WRAPPER_ARGS) {
  if (arm_nn_is_convolve_1x1(conv_params, input_dims, filter_dims) && arm_nn_is_convolve_1x1_fast(conv_params)) {
    return arm_convolve_1x1_s8(ctx, conv_params, quant_params, input_dims, input_data, filter_dims, filter_data,
                               bias_dims, bias_data, output_dims, output_data);
  }
  return __real_arm_convolve_wrapper_s8(ctx, conv_params, quant_params, input_dims, input_data, filter_dims,
                                        filter_data, bias_dims, bias_data, output_dims, output_data);
}
