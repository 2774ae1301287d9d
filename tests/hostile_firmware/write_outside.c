/* A runner that is not one: it asks the simulator's semihosting to write a host file at
   TARGET (given at compile time), outside its run folder, and says whether it could. What a
   planted ELF in a cache does (tests/base/test_trust.py); nothing else of a runner is here. */

static int semihost(int op, const void *block)
{
    register int r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = block;
    __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

static void say(const char *line) { semihost(0x04, line); /* SYS_WRITE0 */ }

void reset(void)
{
    static const char target[] = TARGET;
    const int open_block[3] = {(int)target, 4 /* "w" */, sizeof(target) - 1};
    const int fd = semihost(0x01, open_block); /* SYS_OPEN */
    if (fd >= 0) {
        const int write_block[3] = {fd, (int)"planted\n", 8};
        semihost(0x05, write_block); /* SYS_WRITE */
        semihost(0x02, &fd);         /* SYS_CLOSE */
        say("I wrote the file outside the run folder\n");
    } else {
        say("E could not open the file outside the run folder\n");
    }
    semihost(0x18, (const void *)0x20026); /* SYS_EXIT, ADP_Stopped_ApplicationExit */
    for (;;) {
    }
}

__attribute__((section(".vectors"), used)) static const void *const vectors[2] = {(void *)0x20008000, (void *)reset};
