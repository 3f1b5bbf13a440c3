/* pskv-fuzz-replay FILE|DIR...: runs the libFuzzer target of fuzz_wire.c once
 * over every file named and every regular file in every directory named (not
 * recursive), so `make test` can replay the committed corpus without clang's
 * libFuzzer. A crash or leak is reported by the sanitizers of the build. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Inputs are small; a bigger file is still read whole, up to this bound. */
#define REPLAY_MAX_INPUT (64u << 20)

/* Reads `path` whole and runs the target over it. Returns 0 or -1 (reported). */
static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz-replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    const char *err = buf ? NULL : "out of memory";
    while (!err) {
        if (len == cap) {
            uint8_t *more = cap < REPLAY_MAX_INPUT ? realloc(buf, cap * 2) : NULL;
            if (!more) {
                err = cap < REPLAY_MAX_INPUT ? "out of memory" : "input too large";
                break;
            }
            buf = more;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f))
                err = "read error";
            break;
        }
    }
    int rc = 0;
    if (err) {
        fprintf(stderr, "fuzz-replay: %s: %s\n", path, err);
        rc = -1;
    }
    fclose(f);
    if (rc == 0)
        LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return rc;
}

/* Replays every regular file in `dir`, in name order. Returns inputs run or -1. */
static int replay_dir(const char *dir)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0) {
        fprintf(stderr, "fuzz-replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    int count = 0, failed = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        if (names[i]->d_name[0] != '.' &&
            snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name) < (int)sizeof path &&
            stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            if (replay_file(path) == 0)
                count++;
            else
                failed = 1;
        }
        free(names[i]);
    }
    free(names);
    return failed ? -1 : count;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: pskv-fuzz-replay FILE|DIR...\n");
        return 2;
    }
    long total = 0;
    int failed = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "fuzz-replay: %s: %s\n", argv[i], strerror(errno));
            failed = 1;
        } else if (S_ISDIR(st.st_mode)) {
            int n = replay_dir(argv[i]);
            if (n < 0)
                failed = 1;
            else
                total += n;
        } else if (replay_file(argv[i]) == 0) {
            total++;
        } else {
            failed = 1;
        }
    }
    if (failed) {
        fprintf(stderr, "fuzz-replay: some inputs could not be read\n");
        return 1;
    }
    printf("fuzz-replay: %ld inputs ok\n", total);
    return 0;
}
