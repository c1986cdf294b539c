/*
 * logger.c: the printf-style half of the host's logger extension (EXTENSION_LOGGER_DESCRIPTOR's
 * `log` slot is variadic, which stable Rust cannot define). It formats the message and passes
 * the text to Rust's mcb_host_log_text, which filters by level and writes stderr.
 */
#include <stdarg.h>
#include <stdio.h>

/* Defined in src/api/logger.rs. `severity` is an EXTENSION_LOG_LEVEL (a C enum, int-sized). */
void mcb_host_log_text(unsigned severity, const void *cookie, const char *text, size_t len);

__attribute__((format(printf, 3, 4))) void mcb_host_log(unsigned severity, const void *cookie,
                                                        const char *fmt, ...) {
    char line[2048];
    if (fmt == NULL) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n < 0) {
        return;
    }
    size_t len = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
    mcb_host_log_text(severity, cookie, line, len);
}
