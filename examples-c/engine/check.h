/*
 * check.h: the assertion macros the harness programs share. A failed check prints where and
 * what, counts, and lets the program go on; main returns nonzero when any failed.
 */
#ifndef MCB_CHECK_H
#define MCB_CHECK_H

#include <stdio.h>

/* The failure count. A program of several files (the bucket suite) defines CHECK_SHARED_FAILURES
 * before including this in each, and the counter itself in one of them. */
#ifdef CHECK_SHARED_FAILURES
extern int check_failures;
#else
static int check_failures;
#endif

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);           \
            check_failures++;                                                                  \
        }                                                                                      \
    } while (0)

#define CHECK_EQ_INT(got, want)                                                                \
    do {                                                                                       \
        long long got_ = (long long)(got);                                                     \
        long long want_ = (long long)(want);                                                   \
        if (got_ != want_) {                                                                   \
            fprintf(stderr, "%s:%d: %s is %lld, want %lld\n", __FILE__, __LINE__, #got, got_,  \
                    want_);                                                                    \
            check_failures++;                                                                  \
        }                                                                                      \
    } while (0)

#define CHECK_EQ_STR(got, want)                                                                \
    do {                                                                                       \
        const char *got_ = (got);                                                              \
        const char *want_ = (want);                                                            \
        if (got_ == NULL || strcmp(got_, want_) != 0) {                                        \
            fprintf(stderr, "%s:%d: %s is \"%s\", want \"%s\"\n", __FILE__, __LINE__, #got,    \
                    got_ != NULL ? got_ : "(null)", want_);                                    \
            check_failures++;                                                                  \
        }                                                                                      \
    } while (0)

#define RUN(test)                                                                              \
    do {                                                                                       \
        int before_ = check_failures;                                                          \
        test();                                                                                \
        fprintf(stderr, "%s %s\n", check_failures == before_ ? "ok  " : "FAIL", #test);        \
    } while (0)

#endif /* MCB_CHECK_H */
