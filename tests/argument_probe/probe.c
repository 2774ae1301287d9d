/*
 * CMSIS-NN's own answer to a grid of calls, on the core it was built for (tests/checking/test_arguments.py).
 *
 * Each line of grid.txt (in the semihosting folder) is one call as a cortex_m kernel makes it
 * (ExecuTorch backends/cortex_m/ops/op_quantized_*.cpp: the same dims and parameter structs),
 * made on zeroed data. For each line the probe prints
 *
 *   R <line> <status> <functions entered, in order, joined by '>'> <scratch bytes> <output scratch bytes>
 *
 * The functions are recorded by -Wl,--wrap around every CMSIS-NN function the wrappers dispatch
 * to (WRAPPED in tests/checking/test_arguments.py, built with kernels/cmsis_call), so the path is the one
 * the linked CMSIS-NN took, and the status the one it returned. A scratch size of -1 asks for what the core's CMSIS-NN sizes (what
 * the runner's runtime check demands); 0 passes no buffer (ctx.buf NULL, as the kernels do for an
 * empty scratch tensor).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "arm_nnfunctions.h"
#include "board.h"

static char path[1024];
static int32_t given[2]; /* the bytes of each context's buffer, 0: none */

static void note(const char *name)
{
    if (path[0] != '\0')
        strncat(path, ">", sizeof(path) - strlen(path) - 1);
    strncat(path, name, sizeof(path) - strlen(path) - 1);
}

/* The kernels' functions and what they dispatch to, recorded on entry. */
#define CONV_PARAMS                                                                                                  \
    const cmsis_nn_context *ctx, const cmsis_nn_conv_params *cp, const cmsis_nn_per_channel_quant_params *q,         \
        const cmsis_nn_dims *id, const int8_t *i, const cmsis_nn_dims *fd, const int8_t *f, const cmsis_nn_dims *bd, \
        const int32_t *b, const cmsis_nn_dims *od, int8_t *o
#define CONV_ARGS ctx, cp, q, id, i, fd, f, bd, b, od, o
#define DW_PARAMS                                                                                                    \
    const cmsis_nn_context *ctx, const cmsis_nn_dw_conv_params *cp, const cmsis_nn_per_channel_quant_params *q,      \
        const cmsis_nn_dims *id, const int8_t *i, const cmsis_nn_dims *fd, const int8_t *f, const cmsis_nn_dims *bd, \
        const int32_t *b, const cmsis_nn_dims *od, int8_t *o
#define WRAP(name, params, args)                                                                                     \
    arm_cmsis_nn_status __real_##name(params);                                                                       \
    arm_cmsis_nn_status __wrap_##name(params)                                                                        \
    {                                                                                                                \
        note(#name);                                                                                                 \
        return __real_##name(args);                                                                                  \
    }
#define COMMA ,

WRAP(arm_convolve_wrapper_s8, CONV_PARAMS, CONV_ARGS)
WRAP(arm_convolve_1x1_s8_fast, CONV_PARAMS, CONV_ARGS)
WRAP(arm_convolve_1x1_s8, CONV_PARAMS, CONV_ARGS)
WRAP(arm_convolve_1_x_n_s8, CONV_PARAMS, CONV_ARGS)
WRAP(arm_convolve_s8,
     const cmsis_nn_context *ctx COMMA const cmsis_nn_conv_params *cp COMMA const cmsis_nn_per_channel_quant_params *q
         COMMA const cmsis_nn_dims *id COMMA const int8_t *i COMMA const cmsis_nn_dims *fd COMMA const int8_t *f COMMA
             const cmsis_nn_dims *bd COMMA const int32_t *b COMMA const cmsis_nn_dims *ud COMMA const cmsis_nn_dims *od
                 COMMA int8_t *o,
     ctx COMMA cp COMMA q COMMA id COMMA i COMMA fd COMMA f COMMA bd COMMA b COMMA ud COMMA od COMMA o)
WRAP(arm_depthwise_conv_wrapper_s8, DW_PARAMS, CONV_ARGS)
WRAP(arm_depthwise_conv_3x3_s8, DW_PARAMS, CONV_ARGS)
WRAP(arm_depthwise_conv_s8_opt, DW_PARAMS, CONV_ARGS)
WRAP(arm_depthwise_conv_s8, DW_PARAMS, CONV_ARGS)
WRAP(arm_transpose_s8,
     const int8_t *i COMMA int8_t *o COMMA const cmsis_nn_dims *id COMMA const cmsis_nn_dims *od COMMA
         const cmsis_nn_transpose_params *tp,
     i COMMA o COMMA id COMMA od COMMA tp)
#define TCONV_PARAMS                                                                                                 \
    const cmsis_nn_context *ctx COMMA const cmsis_nn_context *rctx COMMA const cmsis_nn_transpose_conv_params *cp    \
        COMMA const cmsis_nn_per_channel_quant_params *q COMMA const cmsis_nn_dims *id COMMA const int8_t *i COMMA    \
            const cmsis_nn_dims *fd COMMA const int8_t *f COMMA const cmsis_nn_dims *bd COMMA const int32_t *b COMMA  \
                const cmsis_nn_dims *od COMMA int8_t *o
#define TCONV_ARGS ctx COMMA rctx COMMA cp COMMA q COMMA id COMMA i COMMA fd COMMA f COMMA bd COMMA b COMMA od COMMA o
WRAP(arm_transpose_conv_wrapper_s8, TCONV_PARAMS, TCONV_ARGS)
WRAP(arm_transpose_conv_s8, TCONV_PARAMS, TCONV_ARGS)
#define POOL_PARAMS                                                                                                  \
    const cmsis_nn_context *ctx COMMA const cmsis_nn_pool_params *pp COMMA const cmsis_nn_dims *id COMMA             \
        const int8_t *i COMMA const cmsis_nn_dims *fd COMMA const cmsis_nn_dims *od COMMA int8_t *o
#define POOL_ARGS ctx COMMA pp COMMA id COMMA i COMMA fd COMMA od COMMA o
WRAP(arm_avgpool_s8, POOL_PARAMS, POOL_ARGS)
WRAP(arm_max_pool_s8, POOL_PARAMS, POOL_ARGS)

/* Zeroed blocks from the board's arena, given back after each call. */
static uint8_t *arena, *next;

static void *take(int32_t bytes)
{
    void *block = next;
    bytes = bytes > 0 ? bytes : 0;
    next += (bytes + 15) & ~15;
    if (next > board_arena_end())
    {
        printf("E probe: the arena is too small for a call of the grid\n");
        board_exit(3);
    }
    memset(block, 0, (size_t)bytes);
    return block;
}

static int32_t volume(const cmsis_nn_dims *d) { return d->n * d->h * d->w * d->c; }

static cmsis_nn_context scratch(int which, int32_t asked, int32_t sized)
{
    cmsis_nn_context ctx = {NULL, 0};
    ctx.size = asked < 0 ? sized : asked;
    if (ctx.size > 0)
        ctx.buf = take(ctx.size);
    given[which] = ctx.size > 0 ? ctx.size : 0;
    return ctx;
}

/* op_quantized_conv2d.cpp: conv N H W C  OC KH KW KC  OH OW  PH PW SH SW DH DW  SCRATCH */
static arm_cmsis_nn_status conv(const int32_t *v)
{
    const cmsis_nn_dims in = {v[0], v[1], v[2], v[3]}, filter = {v[4], v[5], v[6], v[7]};
    const cmsis_nn_dims out = {v[0], v[8], v[9], v[4]}, bias = {1, 1, 1, v[4]};
    cmsis_nn_conv_params p = {0};
    p.padding.h = v[10], p.padding.w = v[11], p.stride.h = v[12], p.stride.w = v[13];
    p.dilation.h = v[14], p.dilation.w = v[15], p.activation.min = -128, p.activation.max = 127;
    const cmsis_nn_per_channel_quant_params q = {take(4 * v[4]), take(4 * v[4])};
    const cmsis_nn_context ctx = scratch(0, v[16], arm_convolve_wrapper_s8_get_buffer_size(&p, &in, &filter, &out));
    return arm_convolve_wrapper_s8(&ctx, &p, &q, &in, take(volume(&in)), &filter, take(volume(&filter)), &bias,
                                   take(4 * v[4]), &out, take(volume(&out)));
}

/* op_quantized_depthwise_conv2d.cpp: dw N H W C  OC KH KW MULT  OH OW  PH PW SH SW DH DW  SCRATCH */
static arm_cmsis_nn_status depthwise(const int32_t *v)
{
    const cmsis_nn_dims in = {v[0], v[1], v[2], v[3]}, filter = {1, v[5], v[6], v[4]};
    const cmsis_nn_dims out = {v[0], v[8], v[9], v[4]}, bias = {1, 1, 1, v[4]};
    cmsis_nn_dw_conv_params p = {0};
    p.ch_mult = v[7];
    p.padding.h = v[10], p.padding.w = v[11], p.stride.h = v[12], p.stride.w = v[13];
    p.dilation.h = v[14], p.dilation.w = v[15], p.activation.min = -128, p.activation.max = 127;
    const cmsis_nn_per_channel_quant_params q = {take(4 * v[4]), take(4 * v[4])};
    const cmsis_nn_context ctx =
        scratch(0, v[16], arm_depthwise_conv_wrapper_s8_get_buffer_size(&p, &in, &filter, &out));
    return arm_depthwise_conv_wrapper_s8(&ctx, &p, &q, &in, take(volume(&in)), &filter, take(volume(&filter)),
                                         &bias, take(4 * v[4]), &out, take(volume(&out)));
}

/* op_quantized_transpose_conv2d.cpp: tconv N H W C  OC KH KW KC  OH OW  PH PW SH SW OPH OPW  SCRATCH OUT_SCRATCH */
static arm_cmsis_nn_status transpose_conv(const int32_t *v)
{
    const cmsis_nn_dims in = {v[0], v[1], v[2], v[3]}, filter = {v[4], v[5], v[6], v[7]};
    const cmsis_nn_dims out = {v[0], v[8], v[9], v[4]}, bias = {1, 1, 1, v[4]};
    cmsis_nn_transpose_conv_params p = {0};
    p.padding.h = v[10], p.padding.w = v[11], p.stride.h = v[12], p.stride.w = v[13];
    p.padding_offsets.h = v[14], p.padding_offsets.w = v[15], p.dilation.h = 1, p.dilation.w = 1;
    p.activation.min = -128, p.activation.max = 127;
    const cmsis_nn_per_channel_quant_params q = {take(4 * v[4]), take(4 * v[4])};
    const cmsis_nn_context ctx = scratch(0, v[16], arm_transpose_conv_s8_get_buffer_size(&p, &in, &filter, &out));
    const cmsis_nn_context reverse = scratch(1, v[17], arm_transpose_conv_s8_get_reverse_conv_buffer_size(&p, &in, &filter));
    /* The output with room to spare: arm_transpose_conv_s8 writes past it at some strides (a CMSIS-NN defect the
       test suite knows); the status is what is asked here. */
    return arm_transpose_conv_wrapper_s8(&ctx, &reverse, &p, &q, &in, take(volume(&in)), &filter,
                                         take(volume(&filter)), &bias, take(4 * v[4]), &out,
                                         take(4 * volume(&out) + 4096));
}

/* cortex_m_ops_common.h prepare_cmsis_pool2d_config: avg|max N H W C  KH KW  OH OW  PH PW SH SW  SCRATCH */
static arm_cmsis_nn_status pool(const int32_t *v, int average)
{
    const cmsis_nn_dims in = {v[0], v[1], v[2], v[3]}, filter = {1, v[4], v[5], 1};
    const cmsis_nn_dims out = {v[0], v[6], v[7], v[3]};
    cmsis_nn_pool_params p = {0};
    p.padding.h = v[8], p.padding.w = v[9], p.stride.h = v[10], p.stride.w = v[11];
    p.activation.min = -128, p.activation.max = 127;
    if (!average)
    {
        const cmsis_nn_context none = {NULL, 0};
        return arm_max_pool_s8(&none, &p, &in, take(volume(&in)), &filter, &out, take(volume(&out)));
    }
    const cmsis_nn_context ctx = scratch(0, v[12], arm_avgpool_s8_get_buffer_size(out.w, in.c));
    return arm_avgpool_s8(&ctx, &p, &in, take(volume(&in)), &filter, &out, take(volume(&out)));
}

int main(void)
{
    FILE *grid = fopen("grid.txt", "r");
    if (grid == NULL)
    {
        printf("E probe: no grid.txt in the semihosting folder\n");
        board_exit(2);
    }
    arena = board_arena_begin();
    char line[512];
    for (int number = 1; fgets(line, sizeof(line), grid) != NULL; number++)
    {
        char kind[16];
        int32_t v[20] = {0};
        int used = 0;
        if (sscanf(line, "%15s%n", kind, &used) != 1)
            continue;
        long value;
        int count = 0, n;
        while (count < 20 && sscanf(line + used, "%ld%n", &value, &n) == 1)
            used += n, v[count++] = (int32_t)value;
        next = arena;
        path[0] = '\0';
        given[0] = given[1] = 0;
        arm_cmsis_nn_status status;
        if (strcmp(kind, "conv") == 0)
            status = conv(v);
        else if (strcmp(kind, "dw") == 0)
            status = depthwise(v);
        else if (strcmp(kind, "tconv") == 0)
            status = transpose_conv(v);
        else if (strcmp(kind, "avg") == 0 || strcmp(kind, "max") == 0)
            status = pool(v, kind[0] == 'a');
        else
        {
            printf("E probe: line %d: unknown call %s\n", number, kind);
            board_exit(2);
        }
        printf("R %d %d %s %ld %ld\n", number, (int)status, path, (long)given[0], (long)given[1]);
    }
    fclose(grid);
    printf("I probe: done\n");
    board_exit(0);
}
