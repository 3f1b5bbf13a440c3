/* sjson: a small JSON reader for pskv-serve's request bodies (RFC 8259 values:
 * objects, arrays, strings, numbers, true, false, null), parsed into a tree of
 * nodes in one allocation bounded by the body's length.
 *
 * A number keeps its text as well as its double, so a 64-bit key survives
 * (doubles hold integers exactly only up to 2^53).
 *
 * OWNS: a parsed tree owns its nodes and the copy of the text its strings point
 * into; sjson_free frees all of it.
 * THREADS: any thread; no global state.
 * NEVER: reads past the given length, recurses deeper than SJSON_MAX_DEPTH, or
 * logs (the reason of a failure comes back in `why`). */
#ifndef PSKV_SJSON_H
#define PSKV_SJSON_H

#include <stddef.h>
#include <stdint.h>

#define SJSON_MAX_DEPTH 32

typedef enum {
    SJ_NULL,
    SJ_BOOL,
    SJ_NUM,
    SJ_STR,
    SJ_ARR,
    SJ_OBJ
} sjson_type;

typedef struct sjson sjson;
struct sjson {
    sjson_type type;
    double num;        /* SJ_NUM (and SJ_BOOL: 0 or 1) */
    const char *text;  /* SJ_STR: the unescaped string; SJ_NUM: its literal; NUL-ended */
    const char *key;   /* member name when the parent is an object, else NULL */
    size_t n;          /* SJ_ARR, SJ_OBJ: number of children */
    sjson **kids;      /* SJ_ARR, SJ_OBJ: the children in order */
};

typedef struct sjson_doc sjson_doc;

/* Parses text[0..len) (one value, whitespace around it allowed). Returns the
 * document (caller frees with sjson_free) with its root in *root, or NULL with
 * the reason and the byte offset in why (malformed text, too deep, no memory). */
sjson_doc *sjson_parse(const char *text, size_t len, const sjson **root, char *why,
                       size_t whylen);

/* Frees *doc_p and nulls it; NULL-safe. */
void sjson_free(sjson_doc **doc_p);

/* The member `key` of object o, or NULL (also when o is not an object). */
const sjson *sjson_get(const sjson *o, const char *key);

/* The integer value of a number or a string of digits v (a 64-bit key, written
 * either way). Returns 0, or -1 when v is neither or does not fit. */
int sjson_u64(const sjson *v, uint64_t *out);

#endif
