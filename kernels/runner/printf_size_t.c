/* newlib as shipped by Debian (full and nano) does not know the C99 `z` and `t`
 * length modifiers, and ExecuTorch's log messages use %zu: the output is garbled
 * and a following %s can fault. The runner is linked with --wrap=vsnprintf (the
 * function ET_LOG formats with) so the modifiers are dropped first; on 32-bit
 * Arm size_t and ptrdiff_t are int-sized, so the plain conversion is the same. */
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

int __real_vsnprintf(char* buffer, size_t size, const char* format, va_list args);

int __wrap_vsnprintf(char* buffer, size_t size, const char* format, va_list args) {
  char fixed[256];
  if (strlen(format) >= sizeof(fixed)) {
    return __real_vsnprintf(buffer, size, format, args);
  }
  char* out = fixed;
  for (const char* in = format; *in;) {
    if (*in != '%') {
      *out++ = *in++;
      continue;
    }
    *out++ = *in++;
    /* flags, width, precision, then a length modifier */
    while (*in && strchr("-+ #0123456789.*", *in)) {
      *out++ = *in++;
    }
    if (*in == 'z' || *in == 't') {
      in++;
    }
    if (*in) {
      *out++ = *in++;
    }
  }
  *out = '\0';
  return __real_vsnprintf(buffer, size, fixed, args);
}
