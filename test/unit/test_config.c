/* Tests of the configuration table (common/config.c) against a local table:
 * precedence default < environment < flag, both flag spellings, booleans,
 * bounds, positionals and `--`; the manual page and its markdown twin. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "manpage.h"
#include "pskv_errors.h"
#include "suites.h"

#define ENV_PORT "PSKV_UNIT_PORT"
#define ENV_RATE "PSKV_UNIT_RATE"
#define ENV_NAME "PSKV_UNIT_NAME"
#define ENV_JSON "PSKV_UNIT_JSON"

enum { TAB_LEN = 7 };

/* A fresh table each time: cfg_parse writes the effective values into it. */
static void make_table(cfg_entry *tab)
{
    const cfg_entry t[TAB_LEN] = {
        {"port", CFG_INT, "7000", ENV_PORT, 0, 65535, NULL, "port", 0, 0, NULL, NULL},
        {"rate", CFG_DOUBLE, "0.5", ENV_RATE, 0, 1, NULL, "rate", 0, 0, NULL, NULL},
        {"name", CFG_STR, "anon", ENV_NAME, 1, 0, NULL, "name", 0, 0, NULL, NULL},
        {"json", CFG_BOOL, "false", ENV_JSON, 1, 0, NULL, "json output", 0, 0, NULL, NULL},
        {"delta", CFG_INT, "-5", NULL, 1, 0, NULL, "unbounded", 0, 0, NULL, NULL},
        {"note", CFG_STR, NULL, NULL, 1, 0, NULL, "no default", 0, 0, NULL, NULL},
        CFG_END,
    };
    memcpy(tab, t, sizeof t);
}

static void clear_env(void)
{
    unsetenv(ENV_PORT);
    unsetenv(ENV_RATE);
    unsetenv(ENV_NAME);
    unsetenv(ENV_JSON);
}

/* Runs cfg_parse with stdout and stderr sent to /dev/null (errors and --help print). */
static int parse_quiet(cfg_entry *tab, int argc, char **argv, cfg_args *args)
{
    fflush(stdout);
    fflush(stderr);
    int out = dup(1), err = dup(2), null = open("/dev/null", O_WRONLY);
    ck_assert_int_ge(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    int rc = cfg_parse(tab, "prog [flags]", argc, argv, args);
    fflush(stdout);
    fflush(stderr);
    dup2(out, 1);
    dup2(err, 2);
    close(out);
    close(err);
    close(null);
    return rc;
}

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

START_TEST(defaults)
{
    cfg_entry tab[TAB_LEN];
    make_table(tab);
    char *argv[] = {"/usr/bin/prog"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(argv), argv, NULL), 0);
    ck_assert_int_eq(cfg_int(tab, "port"), 7000);
    ck_assert_double_eq(cfg_double(tab, "rate"), 0.5);
    ck_assert_str_eq(cfg_str(tab, "name"), "anon");
    ck_assert_int_eq(cfg_int(tab, "json"), 0);
    ck_assert_int_eq(cfg_int(tab, "delta"), -5);
    ck_assert_str_eq(cfg_str(tab, "note"), "");
    ck_assert_str_eq(cfg_find(tab, "port")->from, "default");
    ck_assert_ptr_null(cfg_find(tab, "nope"));
    ck_assert_ptr_nonnull(cfg_find(tab, "note"));
}
END_TEST

START_TEST(env_overrides_default)
{
    cfg_entry tab[TAB_LEN];
    make_table(tab);
    setenv(ENV_PORT, "8000", 1);
    setenv(ENV_RATE, "0.125", 1);
    setenv(ENV_NAME, "from-env", 1);
    setenv(ENV_JSON, "yes", 1);
    char *argv[] = {"prog"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(argv), argv, NULL), 0);
    ck_assert_int_eq(cfg_int(tab, "port"), 8000);
    ck_assert_double_eq(cfg_double(tab, "rate"), 0.125);
    ck_assert_str_eq(cfg_str(tab, "name"), "from-env");
    ck_assert_int_eq(cfg_int(tab, "json"), 1);
    ck_assert_str_eq(cfg_find(tab, "port")->from, "env");
    ck_assert_str_eq(cfg_find(tab, "delta")->from, "default");

    /* An empty variable counts as unset. */
    setenv(ENV_PORT, "", 1);
    make_table(tab);
    ck_assert_int_eq(parse_quiet(tab, ARGC(argv), argv, NULL), 0);
    ck_assert_int_eq(cfg_int(tab, "port"), 7000);
    ck_assert_str_eq(cfg_find(tab, "port")->from, "default");
}
END_TEST

START_TEST(flag_overrides_env)
{
    cfg_entry tab[TAB_LEN];
    make_table(tab);
    setenv(ENV_PORT, "8000", 1);
    setenv(ENV_NAME, "from-env", 1);
    char *argv[] = {"prog", "--port", "9000", "--name=from-flag"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(argv), argv, NULL), 0);
    ck_assert_int_eq(cfg_int(tab, "port"), 9000);
    ck_assert_str_eq(cfg_str(tab, "name"), "from-flag");
    ck_assert_str_eq(cfg_find(tab, "port")->from, "flag");
    ck_assert_str_eq(cfg_find(tab, "name")->from, "flag");
}
END_TEST

START_TEST(both_flag_spellings)
{
    cfg_entry tab[TAB_LEN];
    make_table(tab);
    char *argv[] = {"prog",   "--port=81", "--rate",  "0.25",
                    "--name", "x=y",       "--note=", "--delta=-12"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(argv), argv, NULL), 0);
    ck_assert_int_eq(cfg_int(tab, "port"), 81);
    ck_assert_double_eq(cfg_double(tab, "rate"), 0.25);
    ck_assert_str_eq(cfg_str(tab, "name"), "x=y");
    ck_assert_str_eq(cfg_str(tab, "note"), "");
    ck_assert_int_eq(cfg_int(tab, "delta"), -12);

    /* The last occurrence wins. */
    make_table(tab);
    char *again[] = {"prog", "--port", "1", "--port=2"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(again), again, NULL), 0);
    ck_assert_int_eq(cfg_int(tab, "port"), 2);
}
END_TEST

START_TEST(bool_flags)
{
    cfg_entry tab[TAB_LEN];
    make_table(tab);
    char *bare[] = {"prog", "--json"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(bare), bare, NULL), 0);
    ck_assert_int_eq(cfg_int(tab, "json"), 1);

    setenv(ENV_JSON, "true", 1);
    make_table(tab);
    char *off[] = {"prog", "--json=false"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(off), off, NULL), 0);
    ck_assert_int_eq(cfg_int(tab, "json"), 0);
    unsetenv(ENV_JSON);

    const char *yes[] = {"1", "true", "yes", "on"}, *no[] = {"0", "false", "no", "off"};
    char buf[32];
    for (int i = 0; i < 4; i++) {
        make_table(tab);
        snprintf(buf, sizeof buf, "--json=%s", yes[i]);
        char *a[] = {"prog", buf};
        ck_assert_int_eq(parse_quiet(tab, 2, a, NULL), 0);
        ck_assert_int_eq(cfg_int(tab, "json"), 1);
        make_table(tab);
        snprintf(buf, sizeof buf, "--json=%s", no[i]);
        ck_assert_int_eq(parse_quiet(tab, 2, a, NULL), 0);
        ck_assert_int_eq(cfg_int(tab, "json"), 0);
    }
    make_table(tab);
    char *bad[] = {"prog", "--json=maybe"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(bad), bad, NULL), -PSKV_EINVAL);

    /* A bare boolean does not swallow the next argument. */
    make_table(tab);
    char *next[] = {"prog", "--json", "--port", "5"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(next), next, NULL), 0);
    ck_assert_int_eq(cfg_int(tab, "json"), 1);
    ck_assert_int_eq(cfg_int(tab, "port"), 5);
}
END_TEST

/* One bad value per run of cfg_parse; each must be refused. */
START_TEST(bounds_and_bad_values)
{
    static const char *const bad[] = {
        "--port=65536", "--port=-1", "--port=abc", "--port=12x", "--port=", "--port=1.5",
        "--port=99999999999999999999", "--rate=1.5", "--rate=-0.1", "--rate=nan",
        "--rate=inf", "--rate=0.5s", "--rate=", "--delta=x",
    };
    cfg_entry tab[TAB_LEN];
    char buf[64];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        make_table(tab);
        snprintf(buf, sizeof buf, "%s", bad[i]);
        char *argv[] = {"prog", buf};
        ck_assert_msg(parse_quiet(tab, 2, argv, NULL) == -PSKV_EINVAL, "%s accepted", bad[i]);
    }
    /* Bounds are inclusive. */
    make_table(tab);
    char *edges[] = {"prog", "--port=65535", "--rate=1"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(edges), edges, NULL), 0);
    ck_assert_int_eq(cfg_int(tab, "port"), 65535);
    ck_assert_double_eq(cfg_double(tab, "rate"), 1.0);
    make_table(tab);
    char *low[] = {"prog", "--port", "0", "--rate", "0"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(low), low, NULL), 0);
    ck_assert_int_eq(cfg_int(tab, "port"), 0);

    /* A bad environment value is refused too. */
    make_table(tab);
    setenv(ENV_PORT, "70000", 1);
    char *plain[] = {"prog"};
    ck_assert_int_eq(parse_quiet(tab, 1, plain, NULL), -PSKV_EINVAL);
    setenv(ENV_PORT, "seven", 1);
    make_table(tab);
    ck_assert_int_eq(parse_quiet(tab, 1, plain, NULL), -PSKV_EINVAL);
    unsetenv(ENV_PORT);
}
END_TEST

START_TEST(cfg_set_reports_reason)
{
    cfg_entry tab[TAB_LEN];
    make_table(tab);
    char err[256] = "";
    cfg_entry *port = cfg_find(tab, "port");
    ck_assert_int_eq(cfg_set(port, "70000", err, sizeof err), -PSKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "--port"));
    ck_assert_int_eq(cfg_set(port, "443", err, sizeof err), 0);
    ck_assert_int_eq(port->i, 443);
    ck_assert_int_eq(cfg_set(port, "0x50", err, sizeof err), -PSKV_EINVAL); /* decimal only */
    ck_assert_int_eq(cfg_set(port, "010", err, sizeof err), 0);
    ck_assert_int_eq(port->i, 10);
}
END_TEST

START_TEST(unknown_flag_and_missing_value)
{
    cfg_entry tab[TAB_LEN];
    make_table(tab);
    char *unknown[] = {"prog", "--prot", "80"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(unknown), unknown, NULL), -PSKV_EINVAL);
    make_table(tab);
    char *unknown_eq[] = {"prog", "--prot=80"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(unknown_eq), unknown_eq, NULL), -PSKV_EINVAL);
    make_table(tab);
    char *prefix[] = {"prog", "--por=80"}; /* no prefix matching */
    ck_assert_int_eq(parse_quiet(tab, ARGC(prefix), prefix, NULL), -PSKV_EINVAL);
    make_table(tab);
    char longname[300];
    memset(longname, 'x', sizeof longname - 1);
    longname[0] = longname[1] = '-';
    longname[sizeof longname - 1] = '\0';
    char *toolong[] = {"prog", longname};
    ck_assert_int_eq(parse_quiet(tab, ARGC(toolong), toolong, NULL), -PSKV_EINVAL);
    make_table(tab);
    char *missing[] = {"prog", "--port"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(missing), missing, NULL), -PSKV_EINVAL);
    make_table(tab);
    char *missing_str[] = {"prog", "--port", "1", "--name"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(missing_str), missing_str, NULL), -PSKV_EINVAL);
}
END_TEST

START_TEST(positionals)
{
    cfg_entry tab[TAB_LEN];
    make_table(tab);
    char *argv[] = {"prog", "first", "--port", "1", "second", "--json", "third"};
    cfg_args args;
    ck_assert_int_eq(parse_quiet(tab, ARGC(argv), argv, &args), 0);
    ck_assert_int_eq(cfg_int(tab, "port"), 1);
    ck_assert_int_eq(cfg_int(tab, "json"), 1);
    ck_assert_int_eq(args.npos, 3);
    ck_assert_str_eq(args.pos[0], "first");
    ck_assert_str_eq(args.pos[1], "second");
    ck_assert_str_eq(args.pos[2], "third");

    make_table(tab);
    char *none[] = {"prog", "--port", "1"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(none), none, &args), 0);
    ck_assert_int_eq(args.npos, 0);

    /* Without somewhere to put them, positionals are an error. */
    make_table(tab);
    char *stray[] = {"prog", "--port", "1", "stray"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(stray), stray, NULL), -PSKV_EINVAL);
}
END_TEST

START_TEST(double_dash)
{
    cfg_entry tab[TAB_LEN];
    make_table(tab);
    char *argv[] = {"prog", "a", "--port", "1", "--", "--port", "2", "--help", "b"};
    cfg_args args;
    ck_assert_int_eq(parse_quiet(tab, ARGC(argv), argv, &args), 0);
    ck_assert_int_eq(cfg_int(tab, "port"), 1);
    ck_assert_int_eq(args.npos, 5);
    ck_assert_str_eq(args.pos[0], "a");
    ck_assert_str_eq(args.pos[1], "--port");
    ck_assert_str_eq(args.pos[2], "2");
    ck_assert_str_eq(args.pos[3], "--help");
    ck_assert_str_eq(args.pos[4], "b");

    make_table(tab);
    char *trailing[] = {"prog", "--port", "3", "--"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(trailing), trailing, NULL), 0);
    ck_assert_int_eq(cfg_int(tab, "port"), 3);

    make_table(tab);
    char *after[] = {"prog", "--", "x"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(after), after, NULL), -PSKV_EINVAL);
}
END_TEST

START_TEST(help)
{
    cfg_entry tab[TAB_LEN];
    make_table(tab);
    char *argv[] = {"prog", "--port", "1", "--help", "--bogus"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(argv), argv, NULL), 1);
    make_table(tab);
    char *shortv[] = {"prog", "-h"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(shortv), shortv, NULL), 1);

    /* The help text names every flag, its default and its variable. */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    cfg_help(tab, "prog [flags]", f);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(text, "usage: prog [flags]"));
    ck_assert_ptr_nonnull(strstr(text, "--port"));
    ck_assert_ptr_nonnull(strstr(text, "--json"));
    ck_assert_ptr_nonnull(strstr(text, "7000"));
    ck_assert_ptr_nonnull(strstr(text, ENV_RATE));
    free(text);
}
END_TEST

/* Writes the page of `tab` with `write` into a string the caller frees. */
static char *page_of(void (*write)(const cfg_entry *, const char *, const char *, void *),
                     const cfg_entry *tab)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    write(tab, "/usr/bin/pskvctl", "pskvctl a|b", f);
    fclose(f);
    return text;
}

/* --markdown prints the manual page's twin: one table row per flag with its range,
 * default and variable, and text that would break a table cell escaped. */
START_TEST(markdown)
{
    cfg_entry tab[TAB_LEN];
    make_table(tab);
    char *argv[] = {"prog", "--markdown", "--bogus"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(argv), argv, NULL), 1);

    const cfg_entry odd[] = {
        {"wire", CFG_STR, "fp16|bf16", "PSKV_UNIT_WIRE", 1, 0, NULL, "fp16|bf16 *or* fp32",
         0, 0, NULL, NULL},
        {"port", CFG_INT, "7000", NULL, 0, 65535, "s", "port", 0, 0, NULL, NULL},
        CFG_END,
    };
    char *md = page_of(man_write_markdown, odd);
    ck_assert_ptr_nonnull(strstr(md, "# pskvctl(1)"));
    ck_assert_ptr_nonnull(strstr(md, "```\npskvctl a|b\n```"));
    ck_assert_ptr_nonnull(strstr(md, "| `--wire` STR | fp16\\|bf16 \\*or\\* fp32 | "
                                     "`fp16\\|bf16` | `PSKV_UNIT_WIRE` |"));
    ck_assert_ptr_nonnull(strstr(md, "| `--port` INT | port (s); range 0 to 65535 | `7000` |  |"));
    ck_assert_ptr_nonnull(strstr(md, "| `--markdown` |"));
    ck_assert_ptr_nonnull(strstr(md, "- `PSKV_UNIT_WIRE`: as `--wire`."));
    char *man = page_of(man_write, odd);
    ck_assert_ptr_nonnull(
        strstr(man, "port (\\fRs\\fR). Range: \\fR0 to 65535\\fR. Default: \\fR7000\\fR."));
    ck_assert_ptr_nonnull(strstr(man, "\\fB\\-\\-markdown\\fR"));
    free(md);
    free(man);
}
END_TEST

/* cfg_set_default replaces only a default: the environment and flags still win,
 * and a value that does not fit the entry is refused. */
START_TEST(set_default_yields_to_env_and_flags)
{
    cfg_entry tab[TAB_LEN];
    make_table(tab);
    setenv(ENV_RATE, "0.25", 1);
    char *argv[] = {"prog", "--name", "from-flag"};
    ck_assert_int_eq(parse_quiet(tab, ARGC(argv), argv, NULL), 0);
    char err[200];
    ck_assert_int_eq(cfg_set_default(tab, "port", "7100", err, sizeof err), 1);
    ck_assert_int_eq(cfg_set_default(tab, "rate", "0.75", err, sizeof err), 0);
    ck_assert_int_eq(cfg_set_default(tab, "name", "other", err, sizeof err), 0);
    ck_assert_int_eq(cfg_int(tab, "port"), 7100);
    ck_assert_double_eq(cfg_double(tab, "rate"), 0.25);
    ck_assert_str_eq(cfg_str(tab, "name"), "from-flag");
    ck_assert_str_eq(cfg_find(tab, "port")->from, "default");
    ck_assert_int_eq(cfg_set_default(tab, "delta", "x", err, sizeof err), -PSKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "--delta"));
}
END_TEST

Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("parse");
    tcase_add_checked_fixture(tc, clear_env, clear_env);
    tcase_add_test(tc, defaults);
    tcase_add_test(tc, env_overrides_default);
    tcase_add_test(tc, flag_overrides_env);
    tcase_add_test(tc, both_flag_spellings);
    tcase_add_test(tc, bool_flags);
    tcase_add_test(tc, bounds_and_bad_values);
    tcase_add_test(tc, cfg_set_reports_reason);
    tcase_add_test(tc, unknown_flag_and_missing_value);
    tcase_add_test(tc, positionals);
    tcase_add_test(tc, double_dash);
    tcase_add_test(tc, help);
    tcase_add_test(tc, markdown);
    tcase_add_test(tc, set_default_yields_to_env_and_flags);
    suite_add_tcase(s, tc);
    return s;
}
