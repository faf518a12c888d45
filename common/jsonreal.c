/* Whether a real number's token is surely the text jansson writes for the double it reads as
 * (json_real_surely_jansson, declared in jsonraw.h): decided from the token's shape and
 * extended-precision arithmetic, with no strtod and no print, because the recogniser
 * (jsonraw.c) meets every real of every result it keeps as bytes. Owns nothing else; a "no"
 * only sends the token to jsonraw.c's slower proof. */
#include "jsonraw.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 10^0 .. 10^27: each a long double exactly (5^27 < 2^64). */
static const long double pow10_exact[] = {1e0L,  1e1L,  1e2L,  1e3L,  1e4L,  1e5L,  1e6L,
                                          1e7L,  1e8L,  1e9L,  1e10L, 1e11L, 1e12L, 1e13L,
                                          1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L, 1e20L,
                                          1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L};
#define POW10_EXACT_MAX 27

/* The digits d[0..n) as an integer (n <= 17, so it fits). */
static uint64_t digits_value(const char *d, size_t n)
{
        uint64_t v = 0;

        for (size_t i = 0; i < n; i++)
                v = v * 10 + (uint64_t)(d[i] - '0');
        return v;
}

/* A real token's parts after its optional '-': the integer digits ip[0..ilen), the fraction's
 * fp[0..flen) (fp NULL without a point), and rest, where what follows them begins (end: the
 * token's end). */
struct real_parts {
        const char *ip, *fp, *rest, *end;
        size_t ilen, flen;
};

/* The exponent form (rest at 'e'): its nd significant digits as m, and x, the decimal exponent of
 * the first. false where "%.17g" and jansson would not have written the token so. */
static bool real_exponent_form(const struct real_parts *t, uint64_t *m, size_t *nd, int *x)
{
        const char *p = t->rest, *end = t->end, *ip = t->ip, *fp = t->fp;
        size_t ilen = t->ilen, flen = t->flen;
        /* "%.17g"'s exponent as jansson leaves it: 'e', no '+', no leading zero. */
        int e = 0;
        bool eneg = false;

        if (*p++ != 'e')
                return false;
        if (p < end && *p == '-') {
                eneg = true;
                p++;
        }
        if (p == end || *p < '1' || *p > '9')
                return false;
        for (; p < end && *p >= '0' && *p <= '9'; p++)
                if ((e = e * 10 + (*p - '0')) > 400)
                        return false;
        if (p != end)
                return false;
        *x = eneg ? -e : e;
        /* One digit before the point, none of the fraction's trailing zeros, and an exponent
         * "%g" writes so (below -4, or from the precision up). */
        if (ilen != 1 || *ip == '0' || (fp && fp[flen - 1] == '0') || (*x >= -4 && *x < 17))
                return false;
        *nd = 1 + flen;
        if (*nd > 17)
                return false;
        *m = digits_value(ip, 1) * (uint64_t)pow10_exact[flen] + digits_value(fp, flen);
        return true;
}

/* The form without an exponent, as real_exponent_form says it. */
static bool real_plain_form(const struct real_parts *t, uint64_t *m, size_t *nd, int *x)
{
        const char *ip = t->ip, *fp = t->fp;
        size_t ilen = t->ilen, flen = t->flen;

        if (!fp)
                return false; /* jansson writes a point or an exponent into every real */
        if (*ip != '0') {
                if (ilen > 17)
                        return false;
                *x = (int)ilen - 1;
                if (flen == 1 && fp[0] == '0') {
                        /* "%g" wrote an integer, jansson added ".0". */
                        *nd = ilen;
                        while (*nd > 1 && ip[*nd - 1] == '0')
                                (*nd)--;
                        *m = digits_value(ip, *nd);
                        return true;
                }
                if (fp[flen - 1] == '0' || ilen + flen > 17)
                        return false;
                *nd = ilen + flen;
                *m = digits_value(ip, ilen) * (uint64_t)pow10_exact[flen] + digits_value(fp, flen);
                return true;
        }
        size_t z = 0; /* the fraction's zeros before its first significant digit */

        if (ilen != 1)
                return false;
        while (z < flen && fp[z] == '0')
                z++;
        if (z == flen || fp[flen - 1] == '0' || flen - z > 17)
                return false;
        *x = -(int)z - 1;
        if (*x < -4)
                return false; /* "%g" writes an exponent there */
        *nd = flen - z;
        *m = digits_value(fp + z, *nd);
        return true;
}

/* Whether the token m * 10^(x - nd + 1) (m of nd significant digits, x the exponent of the
 * first) is what "%.17g" writes for the double it reads as. */
static bool real_reads_back(uint64_t m, size_t nd, int x)
{
        for (; nd < 17; nd++)
                m *= 10; /* 17 digits: the token is m * 10^(x - 16) */
        /* A power of ten: a double just below it prints with the exponent below. */
        if (m == 10000000000000000ull)
                return false;
        int k = x - 16;
        if (k > POW10_EXACT_MAX || -k > POW10_EXACT_MAX)
                return false;
        /* d: the token's value, one rounding off; half: half a unit of its 17th digit. */
        long double d = k >= 0 ? (long double)m * pow10_exact[k] : (long double)m / pow10_exact[-k];
        long double half = k >= 0 ? 0.5L * pow10_exact[k] : 0.5L / pow10_exact[-k];
        double v = (double)d;
        /* Exact: d and v are that close. */
        long double r = fabsl(d - (long double)v);
        /* Within half of v, the token's 17 digits are what "%.17g" writes for v. And it reads
         * as v: half is at most 5e-17 of the token (its 17 digits begin with a non-zero one),
         * less than half the gap between doubles about v (at least 2^-54 of v, the smaller gap
         * below a power of two included). d's roundings are each within 2^-64 of it: eight of
         * them is room to spare. */
        return r < half - ldexpl(d, -61);
}

bool json_real_surely_jansson(const char *tok, size_t n)
{
#if LDBL_MANT_DIG < 64
        (void)tok, (void)n;
        return false; /* no extended precision to decide with */
#else
        const char *p = tok, *end = tok + n;
        struct real_parts t = {.end = end};
        uint64_t m;
        size_t nd;
        int x; /* the decimal exponent of the first significant digit */

        if (p < end && *p == '-')
                p++;
        for (t.ip = p; p < end && *p >= '0' && *p <= '9';)
                p++;
        t.ilen = (size_t)(p - t.ip);
        if (p < end && *p == '.') {
                for (t.fp = ++p; p < end && *p >= '0' && *p <= '9';)
                        p++;
                t.flen = (size_t)(p - t.fp);
        }
        if (t.ilen == 0 || (t.fp && t.flen == 0))
                return false;
        t.rest = p;
        if (p < end ? !real_exponent_form(&t, &m, &nd, &x) : !real_plain_form(&t, &m, &nd, &x))
                return false;
        return real_reads_back(m, nd, x);
#endif
}
