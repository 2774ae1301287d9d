/*
 * Host harness: the cortex_m kernels of ExecuTorch (backends/cortex_m/ops/op_*.cpp,
 * cff6f4dd) as plain C over CMSIS-NN built for the host (scalar: neither ARM_MATH_DSP
 * nor ARM_MATH_MVEI). Each h_<op> takes what the C++ kernel reads from its tensors
 * (sizes in logical order, data in memory order) and makes the CMSIS-NN call the C++
 * makes, with the same parameter structs: the same offsets (negated or not), activation
 * bounds, multipliers and shifts. quantize, dequantize, div and the LUT activation have
 * no CMSIS-NN call; their C++ arithmetic is repeated here.
 *
 * What the harness adds: failed C++ checks return -1 (the C++ aborts or fails the
 * context); a CMSIS-NN error status is returned as is. Scratch buffers are heap
 * blocks at least as large as the kernels touch (the transposed convolution's scratch
 * and output overruns at dbf45dbf are absorbed, so the values can be compared; the
 * overruns themselves are a memory-safety matter).
 *
 * Every integer parameter is int64_t, every pointer a void pointer on the Python side.
 */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arm_nnfunctions.h"
#include "arm_nnsupportfunctions.h"

#define FAIL (-1)

static int64_t numel(const int64_t *sizes, int64_t rank)
{
    int64_t n = 1;
    for (int64_t i = 0; i < rank; i++)
    {
        n *= sizes[i];
    }
    return n;
}

/* cortex_m_ops_common.h is_channels_last_tensor, from sizes and dim order. */
static int is_channels_last(const int64_t *sizes, const int64_t *dim_order, int64_t rank)
{
    if (rank != 4)
    {
        return 0;
    }
    if (sizes[1] == 1 || (sizes[2] == 1 && sizes[3] == 1))
    {
        return 1;
    }
    return dim_order[0] == 0 && dim_order[1] == 2 && dim_order[2] == 3 && dim_order[3] == 1;
}

/* cortex_m_ops_common.h is_channel_broadcast. */
static int is_channel_broadcast(const int64_t *s1, int64_t r1, const int64_t *s2, int64_t r2)
{
    if (r1 != r2 || r1 != 4 || s1[1] != s2[1])
    {
        return 0;
    }
    return numel(s1, r1) == s1[1] || numel(s2, r2) == s2[1];
}

static int same_sizes(const int64_t *s1, int64_t r1, const int64_t *s2, int64_t r2)
{
    return r1 == r2 && memcmp(s1, s2, (size_t)r1 * sizeof(int64_t)) == 0;
}

static int quant_params_ok(int64_t multiplier, int64_t shift)
{
    return multiplier >= INT32_MIN && multiplier <= INT32_MAX && shift >= -31 && shift <= 31;
}

/* NHWC dims as a kernel reads them from its tensor's sizes: legacy NCHW sizes or *_nhwc NHWC sizes. */
static cmsis_nn_dims nhwc_dims(const int64_t *sizes, int64_t nhwc)
{
    cmsis_nn_dims d;
    d.n = (int32_t)sizes[0];
    d.h = (int32_t)(nhwc ? sizes[1] : sizes[2]);
    d.w = (int32_t)(nhwc ? sizes[2] : sizes[3]);
    d.c = (int32_t)(nhwc ? sizes[3] : sizes[1]);
    return d;
}

/* ---- op_quantize_per_tensor.cpp / op_dequantize_per_tensor.cpp (scalar loops) ---- */

int h_quantize_per_tensor(const float *input, int64_t n, double scale, int64_t zero_point, int64_t quant_min,
                          int64_t quant_max, int64_t bits, void *out)
{
    const float inv_scale = 1.0f / (float)scale;
    const int32_t zp = (int32_t)zero_point;
    const int32_t qmin = (int32_t)quant_min;
    const int32_t qmax = (int32_t)quant_max;
    for (int64_t i = 0; i < n; i++)
    {
        int32_t q = zp + (int32_t)nearbyintf(inv_scale * input[i]);
        q = q > qmin ? q : qmin;
        q = q < qmax ? q : qmax;
        if (bits == 8)
        {
            ((int8_t *)out)[i] = (int8_t)q;
        }
        else
        {
            ((int16_t *)out)[i] = (int16_t)q;
        }
    }
    return 0;
}

int h_dequantize_per_tensor(const void *input, int64_t n, double scale, int64_t zero_point, int64_t bits, float *out)
{
    const int32_t zp = (int32_t)zero_point;
    const float fscale = (float)scale;
    for (int64_t i = 0; i < n; i++)
    {
        const int32_t q = bits == 8 ? (int32_t)((const int8_t *)input)[i] : (int32_t)((const int16_t *)input)[i];
        out[i] = (float)((q - zp) * fscale);
    }
    return 0;
}

/* ---- op_quantized_add.cpp / op_quantized_mul.cpp ---- */

int h_quantized_add(const int8_t *in1, const int64_t *s1, int64_t r1, int64_t zero_point1, int64_t multiplier1,
                    int64_t shift1, const int8_t *in2, const int64_t *s2, int64_t r2, int64_t zero_point2,
                    int64_t multiplier2, int64_t shift2, int64_t output_zero_point, int64_t output_multiplier,
                    int64_t output_shift, int64_t activation_min, int64_t activation_max, int8_t *out,
                    const int64_t *so, int64_t ro)
{
    const int channel_broadcast = is_channel_broadcast(s1, r1, s2, r2);
    if (!channel_broadcast && (!same_sizes(s1, r1, s2, r2) || !same_sizes(so, ro, s1, r1)))
    {
        return FAIL;
    }
    if (!quant_params_ok(multiplier1, shift1) || !quant_params_ok(multiplier2, shift2) ||
        !quant_params_ok(output_multiplier, output_shift))
    {
        return FAIL;
    }
    int32_t zp1 = (int32_t)zero_point1, mult1 = (int32_t)multiplier1;
    int sh1 = (int)shift1;
    int32_t zp2 = (int32_t)zero_point2, mult2 = (int32_t)multiplier2;
    int sh2 = (int)shift2;
    const int8_t *p1 = in1, *p2 = in2;
    const int64_t out_numel = numel(so, ro);
    int32_t adds_per_loop;
    if (channel_broadcast)
    {
        if (numel(s1, r1) < numel(s2, r2))
        {
            int32_t t32;
            int t;
            const int8_t *tp;
            t32 = zp1, zp1 = zp2, zp2 = t32;
            t32 = mult1, mult1 = mult2, mult2 = t32;
            t = sh1, sh1 = sh2, sh2 = t;
            tp = p1, p1 = p2, p2 = tp;
        }
        adds_per_loop = (int32_t)s1[1];
    }
    else
    {
        adds_per_loop = (int32_t)out_numel;
    }
    for (int32_t offset = 0; offset < out_numel; offset += adds_per_loop)
    {
        arm_cmsis_nn_status status = arm_elementwise_add_s8(p1 + offset, p2, -zp1, mult1, sh1, -zp2, mult2, sh2, 20,
                                                            out + offset, (int32_t)output_zero_point,
                                                            (int32_t)output_multiplier, (int)output_shift,
                                                            (int32_t)activation_min, (int32_t)activation_max,
                                                            adds_per_loop);
        if (status != ARM_CMSIS_NN_SUCCESS)
        {
            return status;
        }
    }
    return 0;
}

int h_quantized_mul(const int8_t *in1, const int64_t *s1, int64_t r1, int64_t zero_point1, const int8_t *in2,
                    const int64_t *s2, int64_t r2, int64_t zero_point2, int64_t output_zero_point,
                    int64_t output_multiplier, int64_t output_shift, int8_t *out, const int64_t *so, int64_t ro)
{
    const int channel_broadcast = is_channel_broadcast(s1, r1, s2, r2);
    if (!channel_broadcast && (!same_sizes(s1, r1, s2, r2) || !same_sizes(so, ro, s1, r1)))
    {
        return FAIL;
    }
    if (!quant_params_ok(output_multiplier, output_shift))
    {
        return FAIL;
    }
    int32_t zp1 = (int32_t)zero_point1, zp2 = (int32_t)zero_point2;
    const int8_t *p1 = in1, *p2 = in2;
    const int64_t out_numel = numel(so, ro);
    int32_t muls_per_loop;
    if (channel_broadcast)
    {
        if (numel(s1, r1) < numel(s2, r2))
        {
            int32_t t = zp1;
            const int8_t *tp = p1;
            zp1 = zp2, zp2 = t;
            p1 = p2, p2 = tp;
        }
        muls_per_loop = (int32_t)s1[1];
    }
    else
    {
        muls_per_loop = (int32_t)out_numel;
    }
    for (int32_t offset = 0; offset < out_numel; offset += muls_per_loop)
    {
        arm_cmsis_nn_status status = arm_elementwise_mul_s8(p1 + offset, p2, -zp1, -zp2, out + offset,
                                                            (int32_t)output_zero_point, (int32_t)output_multiplier,
                                                            (int32_t)output_shift, INT8_MIN, INT8_MAX, muls_per_loop);
        if (status != ARM_CMSIS_NN_SUCCESS)
        {
            return status;
        }
    }
    return 0;
}

/* ---- op_quantized_div.cpp (float, no CMSIS-NN) ---- */

#define DIV_LOOP(T, TMIN, TMAX)                                                                                        \
    do                                                                                                                 \
    {                                                                                                                  \
        const T *a = (const T *)in1;                                                                                   \
        const T *b = (const T *)in2;                                                                                   \
        T *o = (T *)out;                                                                                               \
        const float lo = (float)(TMIN), hi = (float)(TMAX);                                                            \
        for (int64_t i = 0; i < n; ++i)                                                                                \
        {                                                                                                              \
            const int32_t num = (int32_t)a[i] - zp1;                                                                   \
            const int32_t den = (int32_t)b[i] - zp2;                                                                   \
            const float quotient = (den != 0) ? (float)num / (float)den : 0.0f;                                        \
            const float scaled = roundf(quotient * effective_scale) + (float)out_zp;                                   \
            const float low_clamped = (scaled < hi) ? scaled : hi;                                                     \
            const float clamped = (lo < low_clamped) ? low_clamped : lo;                                               \
            o[i] = (T)clamped;                                                                                         \
        }                                                                                                              \
    } while (0)

int h_quantized_div(const void *in1, int64_t zero_point1, const void *in2, int64_t zero_point2,
                    int64_t output_zero_point, double output_scale, int64_t bits, int64_t n, void *out)
{
    const int32_t zp1 = (int32_t)zero_point1, zp2 = (int32_t)zero_point2, out_zp = (int32_t)output_zero_point;
    const float effective_scale = (float)output_scale;
    if (bits == 8)
    {
        DIV_LOOP(int8_t, INT8_MIN, INT8_MAX);
    }
    else
    {
        DIV_LOOP(int16_t, INT16_MIN, INT16_MAX);
    }
    return 0;
}

/* ---- op_quantized_activation.cpp (the scalar loop) ---- */

int h_quantized_activation(const int8_t *input, const int8_t *lut, int64_t n, int8_t *out)
{
    for (int64_t i = 0; i < n; ++i)
    {
        out[i] = lut[(uint8_t)(input[i] + 128)];
    }
    return 0;
}

/* ---- op_minimum.cpp / op_maximum.cpp ---- */

static cmsis_nn_dims last4(const int64_t *s, int64_t r)
{
    cmsis_nn_dims d = {(int32_t)(r >= 4 ? s[r - 4] : 1),
                       (int32_t)(r >= 3 ? s[r - 3] : 1),
                       (int32_t)(r >= 2 ? s[r - 2] : 1),
                       (int32_t)(r >= 1 ? s[r - 1] : 1)};
    return d;
}

int h_min_max(int64_t is_max, const int8_t *in1, const int64_t *s1, int64_t r1, const int8_t *in2, const int64_t *s2,
              int64_t r2, int8_t *out, const int64_t *so, int64_t ro)
{
    const cmsis_nn_dims d1 = last4(s1, r1), d2 = last4(s2, r2), dout = last4(so, ro);
    const arm_cmsis_nn_status status = is_max ? arm_maximum_s8(NULL, in1, &d1, in2, &d2, out, &dout)
                                              : arm_minimum_s8(NULL, in1, &d1, in2, &d2, out, &dout);
    return status;
}

/* ---- op_quantized_linear.cpp / op_quantized_batch_matmul.cpp ---- */

int h_quantized_linear(const int8_t *input, const int64_t *in_sizes, int64_t in_rank, const int8_t *weights,
                       const int32_t *bias, int32_t *kernel_sum, int64_t input_offset, int64_t filter_offset,
                       int64_t output_offset, int64_t multiplier, int64_t shift, int64_t activation_max,
                       int64_t activation_min, int8_t *out, int64_t out_features)
{
    cmsis_nn_context ctx;
    ctx.size = 0;
    ctx.buf = kernel_sum;
    cmsis_nn_fc_params fc_params;
    fc_params.input_offset = (int32_t)input_offset;
    fc_params.filter_offset = (int32_t)filter_offset;
    fc_params.output_offset = (int32_t)output_offset;
    fc_params.activation.min = (int32_t)activation_min;
    fc_params.activation.max = (int32_t)activation_max;
    cmsis_nn_per_tensor_quant_params quant_params = {(int32_t)multiplier, (int32_t)shift};
    const int32_t in_feat = (int32_t)in_sizes[in_rank - 1];
    int32_t batches = 1;
    for (int64_t i = 0; i < in_rank - 1; i++)
    {
        batches *= (int32_t)in_sizes[i];
    }
    cmsis_nn_dims input_dims = {batches, 1, 1, in_feat};
    cmsis_nn_dims filter_dims = {in_feat, 1, 1, (int32_t)out_features};
    cmsis_nn_dims bias_dims = {1, 1, 1, (int32_t)out_features};
    cmsis_nn_dims output_dims = {batches, 1, 1, (int32_t)out_features};
    return arm_fully_connected_s8(&ctx, &fc_params, &quant_params, &input_dims, input, &filter_dims, weights,
                                  &bias_dims, bias, &output_dims, out);
}

/* The MVE kernel's kernel_sum, as CMSIS-NN computes it (arm_vector_sum_s8). */
int h_vector_sum(int32_t *sums, int64_t cols, int64_t rows, const int8_t *weights, int64_t lhs_offset,
                 int64_t rhs_offset, const int32_t *bias)
{
    return arm_vector_sum_s8(sums, (int32_t)cols, (int32_t)rows, weights, (int32_t)lhs_offset, (int32_t)rhs_offset,
                             bias);
}

int h_quantized_batch_matmul(const int8_t *lhs, const int64_t *lhs_sizes, int64_t lhs_offset, const int8_t *rhs,
                             const int64_t *rhs_sizes, int64_t rhs_offset, int64_t output_offset,
                             int64_t output_multiplier, int64_t output_shift, int8_t *out)
{
    const int32_t batch = (int32_t)lhs_sizes[0], lhs_rows = (int32_t)lhs_sizes[1], inner = (int32_t)lhs_sizes[2];
    const int32_t rhs_cols = (int32_t)rhs_sizes[1];
    if (rhs_sizes[0] != batch || rhs_sizes[2] != inner)
    {
        return FAIL;
    }
    const cmsis_nn_dims lhs_dims = {1, batch, lhs_rows, inner};
    const cmsis_nn_dims rhs_dims = {1, batch, rhs_cols, inner};
    const cmsis_nn_dims out_dims = {1, batch, lhs_rows, rhs_cols};
    const cmsis_nn_bmm_params bmm_params = {
        false, false, {(int32_t)lhs_offset, (int32_t)rhs_offset, (int32_t)output_offset, {INT8_MIN, INT8_MAX}}};
    cmsis_nn_per_tensor_quant_params quant_params = {(int32_t)output_multiplier, (int32_t)output_shift};
    const int32_t scratch = arm_fully_connected_s8_get_buffer_size(&out_dims);
    cmsis_nn_context ctx = {scratch > 0 ? malloc((size_t)scratch) : NULL, scratch};
    const int status = arm_batch_matmul_s8(&ctx, &bmm_params, &quant_params, &lhs_dims, lhs, &rhs_dims, rhs,
                                           &out_dims, out);
    free(ctx.buf);
    return status;
}

/* ---- op_softmax.cpp ---- */

int h_softmax(const int8_t *input, const int64_t *sizes, int64_t rank, int64_t dim, int64_t output_zero_point,
              int64_t input_multiplier, int64_t input_shift, int64_t diff_min, int8_t *out)
{
    const int64_t positive_dim = dim >= 0 ? dim : dim + rank;
    if (positive_dim != rank - 1 || !quant_params_ok(input_multiplier, input_shift) || output_zero_point != -128)
    {
        return FAIL;
    }
    const int32_t row_size = (int32_t)sizes[positive_dim];
    const int32_t num_rows = (int32_t)(numel(sizes, rank) / row_size);
    arm_softmax_s8(input, num_rows, row_size, (int32_t)input_multiplier, (int32_t)input_shift, (int32_t)diff_min, out);
    return 0;
}

/* ---- op_transpose.cpp / op_pad.cpp ---- */

int h_transpose(const int8_t *input, const int64_t *in_sizes, const int64_t *out_sizes, int64_t rank,
                const int64_t *perm, int8_t *out)
{
    if (rank < 1 || rank > 4)
    {
        return FAIL;
    }
    int32_t in_d[4] = {1, 1, 1, 1}, out_d[4] = {1, 1, 1, 1};
    uint32_t perm_buffer[4] = {0, 1, 2, 3};
    for (int64_t i = 0; i < rank; i++)
    {
        in_d[i] = (int32_t)in_sizes[i];
        out_d[i] = (int32_t)out_sizes[i];
        perm_buffer[i] = (uint32_t)perm[i];
    }
    cmsis_nn_dims input_dims = {in_d[0], in_d[1], in_d[2], in_d[3]};
    cmsis_nn_dims output_dims = {out_d[0], out_d[1], out_d[2], out_d[3]};
    const cmsis_nn_transpose_params params = {(int32_t)rank, perm_buffer};
    return arm_transpose_s8(input, out, &input_dims, &output_dims, &params);
}

int h_pad(const int8_t *input, const int64_t *sizes, const int64_t *dim_order, int64_t rank, const int64_t *pre_pad,
          const int64_t *post_pad, int64_t pad_value, int8_t *out)
{
    static const int64_t nhwc_order[4] = {0, 2, 3, 1};
    if (rank < 1 || rank > 4)
    {
        return FAIL;
    }
    const int64_t offset = 4 - rank;
    const int nhwc = is_channels_last(sizes, dim_order, rank);
    int32_t dims[4] = {1, 1, 1, 1};
    for (int64_t i = 0; i < rank; ++i)
    {
        const int64_t src = nhwc ? nhwc_order[offset + i] : i;
        dims[offset + i] = (int32_t)sizes[src];
    }
    cmsis_nn_dims input_dims = {dims[0], dims[1], dims[2], dims[3]};
    cmsis_nn_dims pre = {(int32_t)pre_pad[0], (int32_t)pre_pad[1], (int32_t)pre_pad[2], (int32_t)pre_pad[3]};
    cmsis_nn_dims post = {(int32_t)post_pad[0], (int32_t)post_pad[1], (int32_t)post_pad[2], (int32_t)post_pad[3]};
    return arm_pad_s8(input, out, (int8_t)pad_value, &input_dims, &pre, &post);
}

/* ---- op_quantized_conv2d.cpp / op_quantized_depthwise_conv2d.cpp / op_quantized_transpose_conv2d.cpp ---- */

/* The fields the three conv parameter structs share, filled from the h_* arguments as the kernels fill them. */
#define SET_CONV_PARAMS(p)                                                                                             \
    do                                                                                                                 \
    {                                                                                                                  \
        (p).input_offset = (int32_t)input_offset;                                                                      \
        (p).output_offset = (int32_t)output_offset;                                                                    \
        (p).stride.h = (int32_t)stride[0];                                                                             \
        (p).stride.w = (int32_t)stride[1];                                                                             \
        (p).padding.h = (int32_t)padding[0];                                                                           \
        (p).padding.w = (int32_t)padding[1];                                                                           \
        (p).dilation.h = (int32_t)dilation[0];                                                                         \
        (p).dilation.w = (int32_t)dilation[1];                                                                         \
        (p).activation.min = (int32_t)activation_min;                                                                  \
        (p).activation.max = (int32_t)activation_max;                                                                  \
    } while (0)


int h_quantized_conv2d(int64_t nhwc, const int8_t *input, const int64_t *in_sizes, const int8_t *weight,
                       const int64_t *w_sizes, const int32_t *bias, const int64_t *out_sizes, const int64_t *stride,
                       const int64_t *padding, const int64_t *dilation, int64_t input_offset, int64_t output_offset,
                       int32_t *multipliers, int32_t *shifts, int64_t activation_min, int64_t activation_max,
                       int8_t *out)
{
    const cmsis_nn_dims input_dims = nhwc_dims(in_sizes, nhwc);
    const cmsis_nn_dims filter_dims = {(int32_t)w_sizes[0], (int32_t)w_sizes[1], (int32_t)w_sizes[2],
                                       (int32_t)w_sizes[3]};
    const cmsis_nn_dims output_dims = nhwc_dims(out_sizes, nhwc);
    const cmsis_nn_dims bias_dims = {1, 1, 1, output_dims.c};
    cmsis_nn_conv_params conv_params;
    SET_CONV_PARAMS(conv_params);
    cmsis_nn_per_channel_quant_params quant_params = {multipliers, shifts};
    const int32_t scratch =
        arm_convolve_wrapper_s8_get_buffer_size(&conv_params, &input_dims, &filter_dims, &output_dims);
    if (scratch < 0)
    {
        return FAIL;
    }
    cmsis_nn_context ctx = {scratch > 0 ? malloc((size_t)scratch) : NULL, scratch};
    const int status = arm_convolve_wrapper_s8(&ctx, &conv_params, &quant_params, &input_dims, input, &filter_dims,
                                               weight, &bias_dims, bias, &output_dims, out);
    free(ctx.buf);
    return status;
}

int h_quantized_depthwise_conv2d(int64_t nhwc, const int8_t *input, const int64_t *in_sizes, const int8_t *weight,
                                 const int64_t *w_sizes, const int32_t *bias, const int64_t *out_sizes,
                                 const int64_t *stride, const int64_t *padding, const int64_t *dilation,
                                 int64_t depth_multiplier, int64_t input_offset, int64_t output_offset,
                                 int32_t *multipliers, int32_t *shifts, int64_t activation_min,
                                 int64_t activation_max, int8_t *out)
{
    const cmsis_nn_dims input_dims = nhwc_dims(in_sizes, nhwc);
    const cmsis_nn_dims output_dims = nhwc_dims(out_sizes, nhwc);
    const cmsis_nn_dims filter_dims = {1, (int32_t)w_sizes[1], (int32_t)w_sizes[2], output_dims.c};
    const cmsis_nn_dims bias_dims = {1, 1, 1, output_dims.c};
    cmsis_nn_dw_conv_params dw_conv_params;
    SET_CONV_PARAMS(dw_conv_params);
    dw_conv_params.ch_mult = (int32_t)depth_multiplier;
    cmsis_nn_per_channel_quant_params quant_params = {multipliers, shifts};
    const int32_t scratch =
        arm_depthwise_conv_wrapper_s8_get_buffer_size(&dw_conv_params, &input_dims, &filter_dims, &output_dims);
    if (scratch < 0)
    {
        return FAIL;
    }
    cmsis_nn_context ctx = {scratch > 0 ? malloc((size_t)scratch) : NULL, scratch};
    const int status = arm_depthwise_conv_wrapper_s8(&ctx, &dw_conv_params, &quant_params, &input_dims, input,
                                                     &filter_dims, weight, &bias_dims, bias, &output_dims, out);
    free(ctx.buf);
    return status;
}

#ifdef HAVE_TRANSPOSE_CONV_FIXED
/* arm_transpose_conv_s8 of CMSIS-NN 4a8f5b5d (#233), compiled under this name. */
arm_cmsis_nn_status arm_transpose_conv_s8_fixed233(const cmsis_nn_context *ctx,
                                                   const cmsis_nn_context *output_ctx,
                                                   const cmsis_nn_transpose_conv_params *transpose_conv_params,
                                                   const cmsis_nn_per_channel_quant_params *quant_params,
                                                   const cmsis_nn_dims *input_dims,
                                                   const int8_t *input_data,
                                                   const cmsis_nn_dims *filter_dims,
                                                   const int8_t *filter_data,
                                                   const cmsis_nn_dims *bias_dims,
                                                   const int32_t *bias_data,
                                                   const cmsis_nn_dims *output_dims,
                                                   int8_t *output_data);
#endif

/* variant 0: the wrapper ExecuTorch calls; 1: 4a8f5b5d's row kernel called directly (absent: returns -2). */
int h_quantized_transpose_conv2d(int64_t variant, int64_t nhwc, const int8_t *input, const int64_t *in_sizes,
                                 const int8_t *weight, const int64_t *w_sizes, const int32_t *bias,
                                 const int64_t *out_sizes, const int64_t *stride, const int64_t *padding,
                                 const int64_t *output_padding, const int64_t *dilation, int64_t input_offset,
                                 int64_t output_offset, int32_t *multipliers, int32_t *shifts,
                                 int64_t activation_min, int64_t activation_max, int8_t *out)
{
    const cmsis_nn_dims input_dims = nhwc_dims(in_sizes, nhwc);
    const cmsis_nn_dims filter_dims = {(int32_t)w_sizes[0], (int32_t)w_sizes[1], (int32_t)w_sizes[2],
                                       (int32_t)w_sizes[3]};
    const cmsis_nn_dims output_dims = nhwc_dims(out_sizes, nhwc);
    const cmsis_nn_dims bias_dims = {1, 1, 1, output_dims.c};
    if (filter_dims.n != output_dims.c)
    {
        return FAIL;
    }
    cmsis_nn_transpose_conv_params params;
    SET_CONV_PARAMS(params);
    params.padding_offsets.h = (int32_t)output_padding[0]; /* output_padding, as op_quantized_transpose_conv2d.cpp */
    params.padding_offsets.w = (int32_t)output_padding[1];
    cmsis_nn_per_channel_quant_params quant_params = {multipliers, shifts};

    /* Room for everything the kernel touches: its rolling int32 buffer, and output rows past the end. */
    const int32_t buf_x_elements = (input_dims.w - 1) * params.stride.w + MAX(filter_dims.w, params.stride.w);
    const int32_t rolling = buf_x_elements * output_dims.c * MAX(filter_dims.h, params.stride.h) * 4;
    const int32_t scratch = MAX(arm_transpose_conv_s8_get_buffer_size(&params, &input_dims, &filter_dims, &output_dims),
                                rolling) + 64;
    const int32_t reverse = arm_transpose_conv_s8_get_reverse_conv_buffer_size(&params, &input_dims, &filter_dims);
    const int64_t rows = (int64_t)output_dims.n *
        (output_dims.h + (int64_t)input_dims.h * params.stride.h + filter_dims.h + 1);
    const size_t out_room = (size_t)(rows * output_dims.w * output_dims.c) + 64;
    cmsis_nn_context ctx = {calloc((size_t)scratch, 1), scratch};
    cmsis_nn_context reverse_ctx = {reverse > 0 ? calloc((size_t)reverse, 1) : NULL, reverse};
    int8_t *room = calloc(out_room, 1);
    int status;
    if (variant == 0)
    {
        status = arm_transpose_conv_wrapper_s8(&ctx, &reverse_ctx, &params, &quant_params, &input_dims, input,
                                               &filter_dims, weight, &bias_dims, bias, &output_dims, room);
    }
    else
    {
#ifdef HAVE_TRANSPOSE_CONV_FIXED
        status = arm_transpose_conv_s8_fixed233(&ctx, &reverse_ctx, &params, &quant_params, &input_dims, input,
                                                &filter_dims, weight, &bias_dims, bias, &output_dims, room);
#else
        status = -2;
#endif
    }
    memcpy(out, room, (size_t)output_dims.n * output_dims.h * output_dims.w * output_dims.c);
    free(room);
    free(reverse_ctx.buf);
    free(ctx.buf);
    return status;
}

/* ---- op_quantized_avg_pool2d.cpp / op_quantized_max_pool2d.cpp (prepare_cmsis_pool2d_config) ---- */

static void pool_config(const int64_t *in_sizes, const int64_t *out_sizes, int64_t nhwc, const int64_t *kernel,
                        const int64_t *stride, const int64_t *padding, int64_t act_min, int64_t act_max,
                        cmsis_nn_pool_params *params, cmsis_nn_dims *input_dims, cmsis_nn_dims *filter_dims,
                        cmsis_nn_dims *output_dims)
{
    *input_dims = nhwc_dims(in_sizes, nhwc);
    *output_dims = nhwc_dims(out_sizes, nhwc);
    filter_dims->n = 1;
    filter_dims->h = (int32_t)kernel[0];
    filter_dims->w = (int32_t)kernel[1];
    filter_dims->c = 1;
    params->padding.h = (int32_t)padding[0];
    params->padding.w = (int32_t)padding[1];
    params->stride.h = (int32_t)stride[0];
    params->stride.w = (int32_t)stride[1];
    params->activation.min = (int32_t)act_min;
    params->activation.max = (int32_t)act_max;
}

int h_quantized_avg_pool2d(int64_t nhwc, const int8_t *input, const int64_t *in_sizes, const int64_t *kernel,
                           const int64_t *stride, const int64_t *padding, const int64_t *out_sizes, int8_t *out)
{
    cmsis_nn_pool_params params;
    cmsis_nn_dims input_dims, filter_dims, output_dims;
    pool_config(in_sizes, out_sizes, nhwc, kernel, stride, padding, INT8_MIN, INT8_MAX, &params, &input_dims,
                &filter_dims, &output_dims);
    const int32_t scratch = arm_avgpool_s8_get_buffer_size(output_dims.w, input_dims.c);
    cmsis_nn_context ctx = {scratch > 0 ? malloc((size_t)scratch) : NULL, scratch};
    const int status = arm_avgpool_s8(&ctx, &params, &input_dims, input, &filter_dims, &output_dims, out);
    free(ctx.buf);
    return status;
}

int h_quantized_max_pool2d(int64_t nhwc, const int8_t *input, const int64_t *in_sizes, const int64_t *kernel,
                           const int64_t *stride, const int64_t *padding, int64_t activation_min,
                           int64_t activation_max, const int64_t *out_sizes, int8_t *out)
{
    cmsis_nn_pool_params params;
    cmsis_nn_dims input_dims, filter_dims, output_dims;
    pool_config(in_sizes, out_sizes, nhwc, kernel, stride, padding, activation_min, activation_max, &params,
                &input_dims, &filter_dims, &output_dims);
    cmsis_nn_context ctx = {NULL, 0};
    return arm_max_pool_s8(&ctx, &params, &input_dims, input, &filter_dims, &output_dims, out);
}
