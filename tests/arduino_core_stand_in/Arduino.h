// A stand-in for the Arduino core's Arduino.h, enough to compile (not link) the
// ExecuTorch Arduino library and its example sketches in tests: the declarations
// arduino_pal.cpp and the examples use, with the core API's signatures. The real
// header comes with the board core (arduino:zephyr for the UNO Q).
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
unsigned long millis(void);
unsigned long micros(void);
void delay(unsigned long ms);
void noInterrupts(void);
void interrupts(void);
#ifdef __cplusplus
}
#endif

#define HEX 16
#define DEC 10

#ifdef __cplusplus
// The slice of Arduino's Print/HardwareSerial the examples call.
class StandInSerial {
 public:
  void begin(unsigned long baud);
  size_t print(const char* text);
  size_t print(char c);
  size_t print(int value, int base = DEC);
  size_t print(unsigned int value, int base = DEC);
  size_t print(long value, int base = DEC);
  size_t print(unsigned long value, int base = DEC);
  size_t print(double value, int digits = 2);
  size_t println(const char* text);
  size_t println(int value, int base = DEC);
  size_t println(unsigned int value, int base = DEC);
  size_t println(long value, int base = DEC);
  size_t println(unsigned long value, int base = DEC);
  size_t println(double value, int digits = 2);
  size_t println(void);
  explicit operator bool() const;
};
extern StandInSerial Serial;
#endif
