/* The value counters of runner/value_counters.h: a table of call sites (file, line, kind),
 * written at the end of a run by runner/coverage.c as 'V' records. */
#include <stddef.h>
#include <stdint.h>

#include "value_counters_table.h"

#define SITES 512 /* call sites that ran in one run; more are counted as lost */

static struct cortexm_value_site sites[SITES];
static uint32_t lost;

static struct cortexm_value_site* site_of(int kind, const char* file, int line) {
  uint32_t hash = (uint32_t)(uintptr_t)file * 2654435761u ^ (uint32_t)line * 40503u ^ (uint32_t)kind;
  for (uint32_t k = 0; k < SITES; k++) {
    struct cortexm_value_site* site = &sites[(hash + k) % SITES];
    if (site->file == file && site->line == (uint32_t)line && site->kind == (uint32_t)kind) {
      return site;
    }
    if (site->file == NULL) {
      site->file = file;
      site->line = (uint32_t)line;
      site->kind = (uint32_t)kind;
      return site;
    }
  }
  lost++;
  return NULL;
}

void cortexm_count_rounding(const char* file, int line, int32_t dividend, int32_t exponent) {
  struct cortexm_value_site* site = site_of('R', file, line);
  if (site == NULL) {
    return;
  }
  site->count[0]++;
  if (exponent <= 0) {
    return; /* no division: nothing rounds */
  }
  int32_t mask = (int32_t)((1u << exponent) - 1u);
  int32_t remainder = dividend & mask;
  int32_t floor = dividend >> exponent;
  int32_t threshold = (mask >> 1) + (floor < 0 ? 1 : 0); /* arm_nn_divide_by_power_of_two */
  site->count[1] += remainder > threshold;
  if (remainder == (int32_t)(1u << (exponent - 1))) {
    site->count[dividend >= 0 ? 2 : 3]++;
  }
}

void cortexm_count_clamp(int kind, const char* file, int line, const int32_t* value, const int32_t* bound) {
  struct cortexm_value_site* site = site_of(kind, file, line);
  if (site == NULL) {
    return;
  }
  site->count[0]++;
  for (int lane = 0; lane < 4; lane++) {
    site->count[1 + lane] += kind == 'L' ? value[lane] < bound[lane] : value[lane] > bound[lane];
  }
}

void cortexm_count_choice(int kind, const char* file, int line, int second) {
  struct cortexm_value_site* site = site_of(kind, file, line);
  if (site != NULL) {
    site->count[0]++;
    site->count[1] += second != 0;
  }
}

void cortexm_value_sites(void (*emit)(const struct cortexm_value_site* site, void* context), void* context) {
  for (uint32_t k = 0; k < SITES; k++) {
    if (sites[k].file != NULL) {
      emit(&sites[k], context);
    }
  }
  if (lost) {
    struct cortexm_value_site overflow = {"", 0, 'X', {lost}};
    emit(&overflow, context);
  }
}
