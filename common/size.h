/* Byte sizes written by people: "4096", "64MiB", "1GiB", "4KiB", "1.5GiB", "64MB" (decimal). */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Whole string must be a size; binary suffixes KiB MiB GiB TiB, decimal kB/KB MB GB TB, "B" or
 * none. Fractions allowed with a suffix when the result is a whole number of bytes. Returns 0,
 * -EINVAL (not a size) or -ERANGE (over UINT64_MAX / 2^63). */
int size_parse(const char *s, uint64_t *ret);
/* Room for any size_format or size_format_approx answer: "18446744073709551615 B" and NUL. */
#define SIZE_STRING_MAX 32

/* "64 MiB" style when exact, else bytes: "1000 B". */
char *size_format(uint64_t bytes, char *buf, size_t len);
/* For reading, not for reading back: "1.5 GiB", "64 MiB", "100 B" (one decimal where inexact). */
char *size_format_approx(uint64_t bytes, char *buf, size_t len);
