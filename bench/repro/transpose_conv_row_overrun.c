/* A minimal reproducer: CMSIS-NN's arm_transpose_conv_s8 writes output rows past the end of
 * the output when pad_h > kernel_h - stride_h (with pad_h % stride_h == 0, so it is not
 * CMSIS-NN #230), and with a batch of 2 those rows land in the second image.
 *
 * Build against a CMSIS-NN tree (scalar C, as on a Cortex-M3), e.g.:
 *   cc -O1 -I $CMSIS_NN/Include transpose_conv_row_overrun.c \
 *      $CMSIS_NN/Source/ConvolutionFunctions/*.c $CMSIS_NN/Source/NNSupportFunctions/*.c -o repro
 *
 * The call is the one ExecuTorch's op_quantized_transpose_conv2d.cpp makes for
 * ConvTranspose2d(4, 4, kernel 3x3, stride 2, padding (2, 0)) on an NHWC input of 4x4: the
 * output is 5x9x4 (PyTorch's size: (4 - 1) * 2 - 2 * 2 + 3 = 5 rows). The output is followed
 * by a guard region; the program prints what happened to it and to the second image, and
 * exits 1 if the kernel wrote outside its output or changed another image's result. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arm_nnfunctions.h"

enum { IN_H = 4, IN_W = 4, CH = 4, K = 3, STRIDE = 2, PAD_H = 2, PAD_W = 0 };
enum { OUT_H = (IN_H - 1) * STRIDE - 2 * PAD_H + K, OUT_W = (IN_W - 1) * STRIDE - 2 * PAD_W + K };
enum { IMAGE = OUT_H * OUT_W * CH, GUARD = 256, GUARD_BYTE = 0xA5 };

static int8_t input[2][IN_H * IN_W * CH];
static int8_t filter[CH * K * K * CH];
static int32_t bias[CH], multiplier[CH], shift[CH];

/* Runs a batch of `batch` images into a fresh output followed by a guard; returns the output. */
static int8_t* run(int batch, size_t* guard_bytes_changed) {
  int8_t* output = malloc(batch * IMAGE + GUARD);
  memset(output, 0, batch * IMAGE);
  memset(output + batch * IMAGE, GUARD_BYTE, GUARD);
  cmsis_nn_transpose_conv_params params = {
      .input_offset = 0, .output_offset = 0, .stride = {STRIDE, STRIDE}, .padding = {PAD_W, PAD_H},
      .padding_offsets = {0, 0}, .dilation = {1, 1}, .activation = {-128, 127}};
  cmsis_nn_per_channel_quant_params quant = {multiplier, shift};
  cmsis_nn_dims input_dims = {batch, IN_H, IN_W, CH}, filter_dims = {CH, K, K, CH};
  cmsis_nn_dims bias_dims = {1, 1, 1, CH}, output_dims = {batch, OUT_H, OUT_W, CH};
  int32_t size = arm_transpose_conv_s8_get_buffer_size(&params, &input_dims, &filter_dims, &output_dims);
  cmsis_nn_context ctx = {malloc(size > 0 ? size : 1), size}, output_ctx = {NULL, 0};
  arm_cmsis_nn_status status = arm_transpose_conv_wrapper_s8(&ctx, &output_ctx, &params, &quant, &input_dims,
                                                             batch == 1 ? input[1] : input[0], &filter_dims, filter,
                                                             &bias_dims, bias, &output_dims, output);
  if (status != ARM_CMSIS_NN_SUCCESS) {
    printf("arm_transpose_conv_wrapper_s8 returned %d\n", status);
    exit(2);
  }
  *guard_bytes_changed = 0;
  for (size_t i = 0; i < GUARD; i++) {
    *guard_bytes_changed += (uint8_t)output[batch * IMAGE + i] != GUARD_BYTE;
  }
  free(ctx.buf);
  return output;
}

int main(void) {
  srand(7);
  for (size_t i = 0; i < sizeof(input); i++) ((int8_t*)input)[i] = (int8_t)(rand() % 255 - 127);
  for (size_t i = 0; i < sizeof(filter); i++) filter[i] = (int8_t)(rand() % 255 - 127);
  for (int c = 0; c < CH; c++) {
    bias[c] = rand() % 2001 - 1000;
    multiplier[c] = 1 << 30;  /* 0.5: requantize by half */
    shift[c] = -6;
  }
  size_t changed_one, changed_two;
  int8_t* alone = run(1, &changed_one);   /* the second image on its own */
  int8_t* both = run(2, &changed_two);    /* both images: the second one must come out the same */
  size_t differ = 0;
  for (size_t i = 0; i < IMAGE; i++) differ += alone[i] != both[IMAGE + i];
  printf("output %dx%dx%d per image, pad_h %d > kernel_h - stride_h = %d\n", OUT_H, OUT_W, CH, PAD_H, K - STRIDE);
  printf("batch 1: %zu guard bytes after the output changed\n", changed_one);
  printf("batch 2: %zu guard bytes after the output changed\n", changed_two);
  printf("batch 2: %zu of %d elements of the second image differ from the same image alone\n", differ, IMAGE);
  return changed_one || changed_two || differ ? 1 : 0;
}
