/* The search space of a study: one line per worker flag, read from a small text
 * file (`--lr log 1e-4 0.3`, `--momentum uniform 0 0.99`, `--hidden int 64 512`,
 * `--batch choice 16 32 64`), and the map between a point of the unit cube
 * [0,1]^d, where the search algorithms work, and the flags' values.
 *
 * OWNS its parameters and their texts. THREAD: one caller. NEVER blocks. */
#ifndef PSKV_TUNE_SPACE_H
#define PSKV_TUNE_SPACE_H

#include <stddef.h>

#define SPACE_MAX_DIMS 16
#define SPACE_MAX_CHOICES 32

typedef enum {
    SPACE_LOG,     /* real, uniform in log between lo and hi (lo > 0) */
    SPACE_UNIFORM, /* real, uniform between lo and hi */
    SPACE_INT,     /* integer lo..hi, uniform */
    SPACE_CHOICE,  /* one of the listed words */
} space_kind;

typedef struct space_param {
    char flag[64]; /* without "--" */
    space_kind kind;
    double lo, hi;
    int nchoices;
    char *choices[SPACE_MAX_CHOICES];
} space_param;

typedef struct tune_space {
    int dims;
    space_param p[SPACE_MAX_DIMS];
} tune_space;

/* Parses the text of a space file. known(flag) says whether the workers take a
 * flag, and checks a value against its bounds: 0, or -1 with why filled. Returns
 * 0, or -PSKV_EINVAL with err naming the line and what is wrong. On success the
 * caller frees with space_free; on error nothing is left to free. */
int space_parse(tune_space *s, const char *text,
                int (*known)(const char *flag, const char *value, char *why, size_t len),
                char *err, size_t errlen);

/* Frees the choices' texts (s itself is the caller's). */
void space_free(tune_space *s);

/* Writes flag i's value for unit coordinate u in [0,1] into buf ("0.0123", "64",
 * "exp:0.9"). Returns buf. */
char *space_value(const tune_space *s, int i, double u, char *buf, size_t len);

/* Snaps a unit point to what the flags can take (integers, choices), in place, so
 * that the GP sees the point that ran. */
void space_snap(const tune_space *s, double *u);

/* The grid's points on dimension i: choices and integers their count (capped at
 * `levels` for wide integer ranges), reals `levels` evenly spaced. */
int space_levels(const tune_space *s, int i, int levels);

#endif
