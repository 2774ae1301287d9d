/* A coverage build's counters, written out at the end of a run on a core.
 *
 * The Arm toolchain's libgcov has no file I/O, so the counters are found through the
 * .gcov_info section (-fprofile-info-section; sections.ld keeps it) and serialised with
 * __gcov_info_to_gcda into one file in the run's folder, coverage.bin, through semihosting:
 * records of a tag byte ('F' a .gcda file name, 'D' data of that file), a 32-bit little-
 * endian length and the bytes. cortexm.testing.coverage turns them back into .gcda files (a
 * semihosting host cannot make the folders they belong in) and merges runs. The value
 * counters (runner/value_counters.h) follow as 'V' records: kind, line and five counts as
 * 32-bit little-endian words, then the call site's file name. */
#include <gcov.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "value_counters_table.h"

extern const struct gcov_info* const __gcov_info_start[];
extern const struct gcov_info* const __gcov_info_end[];

static void record(FILE* file, char tag, const void* data, uint32_t length) {
  fputc(tag, file);
  fwrite(&length, sizeof(length), 1, file);
  fwrite(data, 1, length, file);
}

static void gcda_name(const char* name, void* file) {
  record((FILE*)file, 'F', name, (uint32_t)strlen(name));
}

static void gcda_data(const void* data, unsigned length, void* file) {
  record((FILE*)file, 'D', data, length);
}

static void* allocate(unsigned length, void* unused) {
  (void)unused;
  return malloc(length);
}

static void value_site(const struct cortexm_value_site* site, void* file) {
  static unsigned char payload[7 * sizeof(uint32_t) + 256];
  uint32_t words[7] = {site->kind, site->line, site->count[0], site->count[1], site->count[2], site->count[3],
                       site->count[4]};
  size_t name = strlen(site->file);
  name = name > 256 ? 256 : name;
  memcpy(payload, words, sizeof(words));
  memcpy(payload + sizeof(words), site->file, name);
  record((FILE*)file, 'V', payload, (uint32_t)(sizeof(words) + name));
}

void cortexm_write_coverage(void) {
  FILE* file = fopen("coverage.bin", "wb");
  if (file == NULL) {
    printf("E cannot write coverage.bin\n");
    return;
  }
  const struct gcov_info* const* info = __gcov_info_start;
  const struct gcov_info* const* end = __gcov_info_end;
  __asm__("" : "+r"(info));  /* the section's bounds are not known to the compiler */
  for (; info != end; info++) {
    __gcov_info_to_gcda(*info, gcda_name, gcda_data, allocate, file);
  }
  cortexm_value_sites(value_site, file);
  fclose(file);
}
