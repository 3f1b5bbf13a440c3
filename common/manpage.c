/* manpage: man(7) pages and their markdown twins from the configuration tables
 * (contract in manpage.h). Both writers walk the same table and the same page
 * text, in the same order, so the two forms say the same thing. */
#include "manpage.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* What the table cannot say: one line of summary, the description and the exit
 * statuses of each program (docs/operations.md has the long form). */
static const struct page {
    const char *prog, *summary, *description, *exits;
} pages[] = {
    {"pskv-scheduler", "the pskv job's scheduler",
     "Holds the job's membership and cluster view: servers and workers register with it, "
     "it places the key ring's partitions on chains of servers by consistent hashing, "
     "watches heartbeats, replaces dead servers (chain replication), admits joining "
     "servers and workers, coordinates checkpoints and ends the job when every worker is "
     "done. Without --keys it listens on loopback only.",
     "0: the job is done, or SIGINT/SIGTERM. 1: cannot listen, join time-out, an unreadable "
     "manifest, or --resume with no usable checkpoint. 2: usage (bad flags, bad --keys, a "
     "non-loopback --bind without keys or --insecure)."},
    {"pskv-server", "a pskv parameter server",
     "Registers with the scheduler, holds the partitions of the key ring that the view "
     "gives it (as the head, a middle or the tail of their chains), applies pushed "
     "gradients with its tables' updaters (OpenBLAS), forwards them down the chain, "
     "answers pulls under each table's consistency model, and writes checkpoints.",
     "0: stopped by the scheduler at the job's end, or SIGINT/SIGTERM. 1: scheduler "
     "unreachable, registration refused, cannot listen, no view within --join-timeout, "
     "or its checkpoint file unreadable on --resume. 2: usage. 3: replaced (declared dead "
     "while the job ran); it served nothing more."},
    {"pskv-worker", "a pskv worker running one of the built-in applications",
     "Joins the job through libpskv and runs the application chosen by --app (the "
     "synopsis lists them all): training, softmax and mlp (Fashion-MNIST), sparse-lr "
     "(sparse logistic regression on LIBSVM data) and pipeline (an MLP cut into stages on "
     "separate workers); checks, check (an exact-sum check of dense and sparse tables), "
     "resume-check, incr-check, replay, admit, allreduce-check and filter-check; "
     "benchmarks, bench (push/pull or all-reduce throughput) and sparse-bench. Pushes "
     "gradients and pulls weights by key range.",
     "0: the application succeeded. 1: cannot join, training data missing or corrupt, a "
     "table refused, or the application failed. 2: usage (bad flags or values). 128+N: "
     "stopped by signal N."},
    {"pskv-evaluator", "a pskv job's evaluator: validation alongside training",
     "Joins the job (the scheduler's --evaluators 1) with the same application flags as "
     "the workers (--app softmax or mlp), pulls snapshots of the model while they train "
     "(under bsp at a closed clock, under ssp and async with the worker clocks they "
     "reflect), evaluates them on the validation set (the last --validation-split training "
     "images, which the workers leave out), reports val_loss and val_accuracy to the "
     "scheduler (early stopping) and to --metrics, and keeps the best snapshot "
     "(--save-best). With --evaluate PATH and no job, prints a saved model's validation "
     "and test metrics. It never slows or stops training: if it dies, training goes on.",
     "0: the job ended (or was stopped early), or --evaluate done. 1: cannot join, "
     "data missing, a pull failed, --save-best could not be written. 2: usage (an --app "
     "other than softmax or mlp, no --validation-split, --save-best into a missing or "
     "unwritable directory, a bad --best-metric). 128+N: stopped by signal N."},
    {"pskvctl", "control and inspect a pskv job; make keys",
     "status prints the scheduler's view (nodes, roles, liveness, clocks, partitions, "
     "refusals); checkpoint asks for a checkpoint and waits until it is complete (needs a "
     "control key when keys are on); keygen and keys init write CURVE keypairs for one "
     "node or a whole cluster.",
     "0: answered (checkpoint: complete; keys written). 1: no answer within --timeout, "
     "refused, bad answer, checkpoint failed, keys not written. 2: usage."},
    {"pskv-serve", "a read-only serving copy of a pskv model",
     "Loads a model file (--model: pskv-worker --save-model, pskv-evaluator --save-best) "
     "and answers over HTTP from an immutable snapshot of it: POST /v1/predict (softmax "
     "and mlp: rows of dense features; sparse-lr: rows of \"id:value\" features) with "
     "scores, POST /v1/lookup with the rows of given keys of a table, GET /v1/model with "
     "the tables, their versions and staleness, GET /metrics. Every answer carries the "
     "version it reflects. Bad input gets 400 (413 for a body over --max-body) with a JSON "
     "error naming the field; past --queue requests in flight, 503. SIGHUP reloads the "
     "file; answers go on from the old version until the new one is in. The HTTP side "
     "listens on loopback unless --http-bind says otherwise: put a TLS proxy in front.",
     "0: SIGINT/SIGTERM. 1: the model file is missing, corrupt or not a model it can "
     "answer for, or the HTTP port cannot be bound. 2: usage (no --model, bad flags)."},
};

/* Writes s escaped for roff: backslashes and hyphens escaped, and a line that
 * would start with a control character protected. */
static void put(FILE *f, const char *s)
{
    if (*s == '.' || *s == '\'')
        fputs("\\&", f);
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\e", f);
        else if (*s == '-')
            fputs("\\-", f);
        else
            fputc(*s, f);
    }
}

/* Writes before, then s escaped in font `font` (B bold, I italic, R roman; with
 * `flag`, as --s), then after. */
static void font(FILE *f, const char *before, char font, int flag, const char *s,
                 const char *after)
{
    fprintf(f, "%s\\f%c%s", before, font, flag ? "\\-\\-" : "");
    put(f, s);
    fprintf(f, "\\fR%s", after);
}

/* A section of prose, when there is some. */
static void section(FILE *f, const char *title, const char *text)
{
    if (!text)
        return;
    fprintf(f, ".SH %s\n", title);
    put(f, text);
    fputc('\n', f);
}

/* The value's name in OPTIONS, by cfg_type (a boolean takes none). */
static const char *const types[] = {"INT", "NUM", "STR", ""};

/* Writes the accepted range of a bounded number into buf ("0 to 65535"), as the
 * parser checks it (config.c: min > max means unbounded); "" for the rest. */
static const char *range_of(const cfg_entry *e, char *buf, size_t len)
{
    buf[0] = '\0';
    if ((e->type == CFG_INT || e->type == CFG_DOUBLE) && e->min <= e->max)
        snprintf(buf, len, e->type == CFG_INT && e->max < 1e15 ? "%.0f to %.0f" : "%g to %g",
                 e->min, e->max); /* a bound near 2^63 reads better as 9.2e+18 */
    return buf;
}

/* The page text of program `base`, or NULL. */
static const struct page *page_of(const char *base)
{
    for (size_t i = 0; i < sizeof pages / sizeof *pages; i++)
        if (!strcmp(pages[i].prog, base))
            return &pages[i];
    return NULL;
}

void man_write(const cfg_entry *tab, const char *prog, const char *usage, void *stream)
{
    FILE *f = stream;
    const char *base = strrchr(prog, '/') ? strrchr(prog, '/') + 1 : prog;
    const struct page *pg = page_of(base);
    fputs(".TH ", f);
    put(f, base);
    fputs(" 1 \"\" \"pskv 0.1.0\" \"pskv manual\"\n.SH NAME\n", f);
    put(f, base);
    fputs(" \\- ", f);
    put(f, pg ? pg->summary : "a pskv program");
    fputs("\n.SH SYNOPSIS\n.nf\n", f);
    put(f, usage);
    fputs("\n.fi\n", f);
    section(f, "DESCRIPTION", pg ? pg->description : NULL);
    fputs(".SH OPTIONS\nFlags take \\fB\\-\\-flag value\\fR or \\fB\\-\\-flag=value\\fR; "
          "boolean flags take no value. An environment variable sets the default a flag "
          "overrides.\n",
          f);
    for (const cfg_entry *e = tab; e->name; e++) {
        font(f, ".TP\n", 'B', 1, e->name, *types[e->type] ? " " : "\n");
        if (*types[e->type])
            font(f, "", 'I', 0, types[e->type], "\n");
        put(f, e->help);
        if (e->unit)
            font(f, " (", 'R', 0, e->unit, ")");
        char range[80];
        if (*range_of(e, range, sizeof range))
            font(f, ". Range: ", 'R', 0, range, "");
        font(f, ". Default: ", 'R', 0, e->def && *e->def ? e->def : "none", "");
        if (e->env)
            font(f, "; environment ", 'B', 0, e->env, "");
        fputs(".\n", f);
    }
    font(f, ".TP\n", 'B', 1, "help", "\nPrints the flags, their defaults and variables.\n");
    font(f, ".TP\n", 'B', 1, "man", "\nPrints this page (man(7) source).\n");
    font(f, ".TP\n", 'B', 1, "markdown", "\nPrints this page as markdown (docs/reference/).\n");
    fputs(".SH ENVIRONMENT\n", f);
    for (const cfg_entry *e = tab; e->name; e++)
        if (e->env) {
            font(f, ".TP\n", 'B', 0, e->env, "\nAs ");
            font(f, "", 'B', 1, e->name, ".\n");
        }
    section(f, "EXIT STATUS", pg ? pg->exits : NULL);
    fputs(".SH SEE ALSO\n\\fBpskv\\-scheduler\\fR(1), \\fBpskv\\-server\\fR(1), "
          "\\fBpskv\\-worker\\fR(1), \\fBpskvctl\\fR(1); /usr/share/doc/pskv/ "
          "(reference/: every flag; operations.md: launching across hosts, security).\n",
          f);
}

/* Writes s for a markdown table cell or paragraph: the characters that would
 * start emphasis, code, HTML or a new cell are escaped; an underscore
 * inside a word (val_loss) is left as it is, since it starts nothing. */
static void md_put(FILE *f, const char *s)
{
    for (const char *p = s; *p; p++) {
        int inword = *p == '_' && p > s && isalnum((unsigned char)p[-1]) &&
                     isalnum((unsigned char)p[1]);
        if (strchr("\\|*`<", *p) || (*p == '_' && !inword))
            fputc('\\', f);
        fputc(*p, f);
    }
}

/* Writes s as a code span (a default value, a variable): only '|' needs a
 * backslash there, so that it does not end the table cell. */
static void md_code(FILE *f, const char *s)
{
    fputc('`', f);
    for (; *s; s++) {
        if (*s == '|')
            fputc('\\', f);
        fputc(*s, f);
    }
    fputc('`', f);
}

/* A section of prose, when there is some. */
static void md_section(FILE *f, const char *title, const char *text)
{
    if (!text)
        return;
    fprintf(f, "\n## %s\n\n", title);
    md_put(f, text);
    fputc('\n', f);
}

void man_write_markdown(const cfg_entry *tab, const char *prog, const char *usage,
                        void *stream)
{
    FILE *f = stream;
    const char *base = strrchr(prog, '/') ? strrchr(prog, '/') + 1 : prog;
    const struct page *pg = page_of(base);
    fprintf(f, "# %s(1)\n\n<!-- Generated by `%s --markdown` from its flag table "
               "(common/manpage.c): do not edit; run `make docs`. -->\n\n%s: ",
            base, base, base);
    md_put(f, pg ? pg->summary : "a pskv program");
    fputs(".\n\n## Synopsis\n\n```\n", f);
    fputs(usage, f);
    fputs("\n```\n", f);
    md_section(f, "Description", pg ? pg->description : NULL);
    fputs("\n## Options\n\nFlags take `--flag value` or `--flag=value`; boolean flags "
          "take no value. An environment variable sets the default a flag overrides.\n\n"
          "| flag | meaning | default | environment |\n|---|---|---|---|\n",
          f);
    for (const cfg_entry *e = tab; e->name; e++) {
        fprintf(f, "| `--%s`%s%s | ", e->name, *types[e->type] ? " " : "", types[e->type]);
        md_put(f, e->help);
        if (e->unit) {
            fputs(" (", f);
            md_put(f, e->unit);
            fputc(')', f);
        }
        char range[80];
        if (*range_of(e, range, sizeof range))
            fprintf(f, "; range %s", range);
        fputs(" | ", f);
        if (e->def && *e->def)
            md_code(f, e->def);
        else
            fputs("none", f);
        fputs(" | ", f);
        if (e->env)
            md_code(f, e->env);
        fputs(" |\n", f);
    }
    fputs("| `--help` | Prints the flags, their defaults and variables. | | |\n"
          "| `--man` | Prints this page (man(7) source). | | |\n"
          "| `--markdown` | Prints this page as markdown (docs/reference/). | | |\n"
          "\n## Environment\n\n",
          f);
    int any = 0;
    for (const cfg_entry *e = tab; e->name; e++)
        if (e->env) {
            fprintf(f, "- `%s`: as `--%s`.\n", e->env, e->name);
            any = 1;
        }
    if (!any)
        fputs("None.\n", f);
    md_section(f, "Exit status", pg ? pg->exits : NULL);
    fputs("\n## See also\n\n[pskv-scheduler](pskv-scheduler.md), [pskv-server](pskv-server.md), "
          "[pskv-worker](pskv-worker.md), [pskv-evaluator](pskv-evaluator.md), "
          "[pskvctl](pskvctl.md); [operations.md](../operations.md): launching across hosts, "
          "security.\n",
          f);
}
