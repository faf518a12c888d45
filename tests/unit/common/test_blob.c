/* blob: a copy of the bytes, NUL-terminated; the ETag the API has always sent; the last
 * reference frees (ASan's leak check sees a blob left behind). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "blob.h"

static void test_blob_copies_bytes_and_terminates(void **state)
{
        char src[] = {'{', '}', 'x'};
        struct blob *b = NULL;

        (void)state;
        assert_int_equal(blob_new(src, 2, &b), 0);
        src[0] = '!';
        assert_int_equal(b->len, 2);
        assert_string_equal(b->data, "{}");
        blob_unref(b);
}

static void test_blob_etag_is_quoted_fnv1a(void **state)
{
        struct blob *b = NULL;
        char tag[BLOB_ETAG_MAX];

        (void)state;
        /* FNV-1a 64 of no bytes is its offset basis; of "a" a published test vector. */
        blob_etag("", 0, tag);
        assert_string_equal(tag, "\"cbf29ce484222325\"");
        assert_int_equal(blob_new("a", 1, &b), 0);
        assert_string_equal(b->etag, "\"af63dc4c8601ec8c\"");
        blob_unref(b);
}

static void test_blob_last_reference_frees(void **state)
{
        struct blob *b = NULL;

        (void)state;
        assert_int_equal(blob_new("abc", 3, &b), 0);
        assert_ptr_equal(blob_ref(b), b);
        assert_null(blob_unref(b));
        assert_string_equal(b->data, "abc"); /* still held once */
        assert_null(blob_unref(b));
        assert_null(blob_unref(NULL));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_blob_copies_bytes_and_terminates),
            cmocka_unit_test(test_blob_etag_is_quoted_fnv1a),
            cmocka_unit_test(test_blob_last_reference_frees),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
