/* The convolution wrapper as a test's perturbation replaces it: linked with
 * -Wl,--wrap=arm_convolve_wrapper_s8, calls go to __wrap_, and __real_ is CMSIS-NN's own. */
#ifndef CORTEXM_TEST_CONVOLVE_WRAPPER_H
#define CORTEXM_TEST_CONVOLVE_WRAPPER_H
#include "arm_nnfunctions.h"

#define CONVOLVE_WRAPPER_ARGS                                                                        \
  const cmsis_nn_context *ctx, const cmsis_nn_conv_params *conv_params,                             \
      const cmsis_nn_per_channel_quant_params *quant_params, const cmsis_nn_dims *input_dims,       \
      const int8_t *input_data, const cmsis_nn_dims *filter_dims, const int8_t *filter_data,        \
      const cmsis_nn_dims *bias_dims, const int32_t *bias_data, const cmsis_nn_dims *output_dims,   \
      int8_t *output_data

arm_cmsis_nn_status __real_arm_convolve_wrapper_s8(CONVOLVE_WRAPPER_ARGS);
arm_cmsis_nn_status __wrap_arm_convolve_wrapper_s8(CONVOLVE_WRAPPER_ARGS);

#endif
