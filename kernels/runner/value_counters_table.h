/* A call site's value counters (runner/value_counters.h says what each kind counts). */
#ifndef CORTEXM_VALUE_COUNTERS_TABLE_H
#define CORTEXM_VALUE_COUNTERS_TABLE_H

#include <stdint.h>

struct cortexm_value_site {
  const char* file; /* __FILE__ of the call; NULL: a free entry */
  uint32_t line;
  uint32_t kind; /* 'R', 'L', 'U', 'M', 'N'; 'X': count[0] sites were lost (the table was full) */
  uint32_t count[5];
};

/* Each site that ran, then, if the table ran out, an 'X' site. */
void cortexm_value_sites(void (*emit)(const struct cortexm_value_site* site, void* context), void* context);

#endif
