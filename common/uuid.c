/* UUIDv7 job ids (RFC 9562): 48-bit Unix ms, version 7, 12-bit rand_a, variant 10, 62-bit
 * rand_b, from getrandom(). Within one process ids are strictly increasing: in the same (or an
 * earlier, if the clock stepped back) millisecond rand_a is used as a counter (RFC 9562 6.2,
 * method 1); when it runs out the timestamp is advanced by one ms. */
#include "uuid.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>

#include "util.h"

/* A UUID's 128 bits (RFC 9562). */
#define UUID_BYTES 16
/* The random bytes of one id: 2 for rand_a's 12 bits (or the counter's start), 8 for rand_b's
 * 62. */
#define UUID_RANDOM_BYTES 10
/* The text's length without its NUL: 32 hex digits and 4 dashes. */
#define UUID_TEXT_LEN (UUID_STRING_MAX - 1)

static pthread_mutex_t uuid_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t last_ms;
static uint16_t last_counter; /* 12 bits */

static int getrandom_all(void *buf, size_t len)
{
        uint8_t *p = buf;

        while (len > 0) {
                ssize_t n = getrandom(p, len, 0);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

/* Each thread draws its ids' random bytes from a pool it fills with one getrandom() for 25 ids:
 * a call for every id was a system call a submit under core_lock (the id is taken there, so
 * that ids follow queue order). The bytes are the kernel's all the same, each used once. A
 * forked child starts with an empty pool (pool_forget), so it never reuses its parent's. */
#define POOL_BYTES 250
static _Thread_local uint8_t pool[POOL_BYTES];
static _Thread_local size_t pool_left;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static void pool_forget(void)
{
        pool_left = 0;
}

static void pool_init(void)
{
        (void)pthread_atfork(NULL, NULL, pool_forget);
}

static int random_bytes(void *buf, size_t len)
{
        assert(len <= POOL_BYTES);
        pthread_once(&pool_once, pool_init);
        if (len > pool_left) {
                int r = getrandom_all(pool, POOL_BYTES);

                if (r < 0)
                        return r;
                pool_left = POOL_BYTES;
        }
        memcpy(buf, pool + POOL_BYTES - pool_left, len);
        /* Used bytes are not kept about. */
        memset(pool + POOL_BYTES - pool_left, 0, len);
        pool_left -= len;
        return 0;
}

static void format(uint64_t ms, uint16_t rand_a, const uint8_t rand_b[8], char ret[UUID_STRING_MAX])
{
        uint8_t b[UUID_BYTES];

        b[0] = (uint8_t)(ms >> 40);
        b[1] = (uint8_t)(ms >> 32);
        b[2] = (uint8_t)(ms >> 24);
        b[3] = (uint8_t)(ms >> 16);
        b[4] = (uint8_t)(ms >> 8);
        b[5] = (uint8_t)ms;
        b[6] = (uint8_t)(0x70 | ((rand_a >> 8) & 0x0f));
        b[7] = (uint8_t)rand_a;
        memcpy(b + 8, rand_b, 8);
        b[8] = (uint8_t)(0x80 | (b[8] & 0x3f));

        /* By hand, not snprintf's sixteen "%02x": this runs under core_lock for every submit. */
        static const char hex[] = "0123456789abcdef";
        char *o = ret;
        for (size_t i = 0; i < UUID_BYTES; i++) {
                if (i == 4 || i == 6 || i == 8 || i == 10)
                        *o++ = '-';
                *o++ = hex[b[i] >> 4];
                *o++ = hex[b[i] & 0x0f];
        }
        *o = '\0';
}

/* Exactly at unix_ms, random otherwise; does not take part in the process's ordering (used for
 * ids of a given time, e.g. tests and cursors). */
int uuid7_generate_at(uint64_t unix_ms, char ret[UUID_STRING_MAX])
{
        uint8_t rnd[UUID_RANDOM_BYTES];
        int r;

        if (unix_ms >> 48)
                return -ERANGE;
        r = random_bytes(rnd, sizeof(rnd));
        if (r < 0)
                return r;
        format(unix_ms, (uint16_t)((rnd[0] << 8 | rnd[1]) & 0x0fff), rnd + 2, ret);
        return 0;
}

int uuid7_generate(char ret[UUID_STRING_MAX])
{
        uint64_t ms = now_realtime_ms();
        uint8_t rnd[UUID_RANDOM_BYTES];
        uint16_t counter;
        int r;

        r = random_bytes(rnd, sizeof(rnd));
        if (r < 0)
                return r;

        pthread_mutex_lock(&uuid_lock);
        if (ms > last_ms) {
                /* Fresh millisecond: random start with the top bit clear leaves at least 2048
                 * increments before the counter runs out. */
                counter = (uint16_t)((rnd[0] << 8 | rnd[1]) & 0x07ff);
        } else if (last_counter < 0x0fff) {
                ms = last_ms;
                counter = (uint16_t)(last_counter + 1);
        } else {
                ms = last_ms + 1;
                counter = (uint16_t)((rnd[0] << 8 | rnd[1]) & 0x07ff);
        }
        last_ms = ms;
        last_counter = counter;
        pthread_mutex_unlock(&uuid_lock);

        format(ms, counter, rnd + 2, ret);
        return 0;
}

bool uuid_is_valid(const char *s)
{
        if (!s)
                return false;
        for (size_t i = 0; i < UUID_TEXT_LEN; i++) {
                char c = s[i];

                if (i == 8 || i == 13 || i == 18 || i == 23) {
                        if (c != '-')
                                return false;
                } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
                             (c >= 'A' && c <= 'F'))) {
                        return false; /* also stops at a NUL before the end */
                }
        }
        return s[UUID_TEXT_LEN] == '\0';
}
