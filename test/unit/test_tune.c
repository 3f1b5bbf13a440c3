/* Tests of pskv-tune's search (scheduler/tune/): the GP posterior and expected
 * improvement against closed forms, a GP search on a 1-D quadratic, grid coverage,
 * random reproducibility, ASHA and median stopping against traces worked by
 * hand, and the space file's refusals naming the line. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "suites.h"
#include "tune/gp.h"
#include "tune/space.h"
#include "tune/suggest.h"
#include "tune/tplace.h"
#include "tune/tsched.h"

static double mat(double r, double ell, double s2)
{
    double a = sqrt(5.0) * r / ell;
    return s2 * (1 + a + 5 * r * r / (3 * ell * ell)) * exp(-a);
}

START_TEST(gp_one_point_closed_form)
{
    double x0[1] = {0}, y0[1] = {2}, x[1] = {0.3}, mu, var;
    tune_gp *g = gp_new(1, 1, x0, y0, 0.5, 1.5, 0.1);
    ck_assert_ptr_nonnull(g);
    gp_predict(g, x, &mu, &var);
    double k = mat(0.3, 0.5, 1.5);
    ck_assert_double_eq_tol(mu, k * 2 / 1.6, 1e-12);
    ck_assert_double_eq_tol(var, 1.5 - k * k / 1.6, 1e-12);
    ck_assert_double_eq_tol(gp_matern52(0, 0.5, 1.5), 1.5, 1e-15);
    gp_destroy(&g);
    ck_assert_ptr_null(g);
    gp_destroy(&g);
}
END_TEST

START_TEST(gp_two_points_closed_form)
{
    /* K = [[a, b], [b, a]], K^-1 = [[a, -b], [-b, a]] / (a^2 - b^2) */
    double xs[2] = {0, 1}, ys[2] = {1, -0.5}, x[1] = {0.25}, mu, var;
    double ell = 0.7, s2 = 2, noise = 0.05;
    tune_gp *g = gp_new(2, 1, xs, ys, ell, s2, noise);
    ck_assert_ptr_nonnull(g);
    gp_predict(g, x, &mu, &var);
    double a = s2 + noise, b = mat(1, ell, s2), det = a * a - b * b;
    double k0 = mat(0.25, ell, s2), k1 = mat(0.75, ell, s2);
    double al0 = (a * ys[0] - b * ys[1]) / det, al1 = (-b * ys[0] + a * ys[1]) / det;
    double q = (a * k0 * k0 - 2 * b * k0 * k1 + a * k1 * k1) / det;
    ck_assert_double_eq_tol(mu, k0 * al0 + k1 * al1, 1e-12);
    ck_assert_double_eq_tol(var, s2 - q, 1e-12);
    gp_destroy(&g);
}
END_TEST

START_TEST(ei_closed_form)
{
    /* EI = (mu - best) Phi(z) + sigma phi(z), z = (mu - best) / sigma */
    ck_assert_double_eq_tol(gp_ei(1, 1, 0), 0.8413447460685429 + 0.24197072451914337, 1e-12);
    ck_assert_double_eq_tol(gp_ei(0, 2, 0), 2 * 0.3989422804014327, 1e-12);
    ck_assert_double_eq(gp_ei(-1, 0, 0), 0);
    ck_assert_double_eq_tol(gp_ei(3, 0, 1), 2, 1e-15);
    ck_assert(gp_ei(-3, 1, 0) > 0 && gp_ei(-3, 1, 0) < gp_ei(-2, 1, 0));
}
END_TEST

static int know(const char *flag, const char *value, char *why, size_t len)
{
    static const char *flags[] = {"lr", "momentum", "batch", "hidden", "a", "b"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (!strcmp(flag, flags[i])) {
            (void)value;
            return 0;
        }
    snprintf(why, len, "pskv-worker has no such flag");
    return -1;
}

START_TEST(gp_finds_quadratic_optimum)
{
    tune_space s;
    char err[256];
    ck_assert_int_eq(space_parse(&s, "--lr uniform 0 1\n", know, err, sizeof err), 0);
    double x[12], y[12];
    double bestu = -1, besty = -INFINITY;
    for (int i = 0; i < 12; i++) {
        suggest_obs o = {i, x, y};
        ck_assert_int_eq(suggest_point(&s, ALGO_GP, 7, i, 3, &o, &x[i]), 0);
        y[i] = -(x[i] - 0.3) * (x[i] - 0.3);
        if (y[i] > besty) {
            besty = y[i];
            bestu = x[i];
        }
    }
    ck_assert_msg(fabs(bestu - 0.3) < 0.03, "best %g after 12 trials", bestu);
    space_free(&s);
}
END_TEST

/* y varies along dimension 0 only: the fit must give dimension 1 the longer
 * length scale, and the batched prediction must equal the single one; at 150
 * points (the shape fitted on a subset of 100) as at 20 */
static void flat_dimension(int n)
{
    double x[300], y[150];
    for (int i = 0; i < n; i++) {
        x[2 * i] = suggest_uniform(3, (uint64_t)i, 0);
        x[2 * i + 1] = suggest_uniform(3, (uint64_t)i, 1);
        y[i] = sin(6 * x[2 * i]);
    }
    tune_gp *g = gp_new(n, 2, x, y, 0, 0, 0);
    ck_assert_ptr_nonnull(g);
    ck_assert_msg(gp_ell_dim(g, 1) > 2 * gp_ell_dim(g, 0), "ell %g, %g", gp_ell_dim(g, 0),
                  gp_ell_dim(g, 1));
    double q[6] = {0.1, 0.9, 0.5, 0.5, 0.77, 0.02}, mu[3], var[3];
    ck_assert_int_eq(gp_predict_many(g, 3, q, mu, var), 0);
    for (int c = 0; c < 3; c++) {
        double m1, v1;
        gp_predict(g, q + 2 * c, &m1, &v1);
        ck_assert_double_eq_tol(mu[c], m1, 1e-9);
        ck_assert_double_eq_tol(var[c], v1, 1e-9);
        ck_assert_double_eq_tol(mu[c], sin(6 * q[2 * c]), 0.1);
    }
    gp_destroy(&g);
}

START_TEST(gp_many_equals_one_and_ard_finds_the_flat_dimension)
{
    flat_dimension(20);
    flat_dimension(150);
}
END_TEST

START_TEST(gp_never_repeats_a_discrete_point)
{
    /* 24 points of choices: 24 GP suggestions (one pending each time) are 24
     * different points, whatever the objective says */
    tune_space s;
    char err[256];
    ck_assert_int_eq(space_parse(&s, "--lr choice 1 2 3 4\n--momentum choice 0 0.5 0.9\n"
                                     "--hidden choice 64 256\n",
                                 know, err, sizeof err),
                     0);
    double x[24 * 3], y[24];
    for (int i = 0; i < 24; i++) {
        suggest_obs o = {i, x, y};
        ck_assert_int_eq(suggest_point(&s, ALGO_GP, 5, i, 3, &o, x + 3 * i), 0);
        for (int j = 0; j < i; j++)
            ck_assert_msg(memcmp(x + 3 * i, x + 3 * j, sizeof(double) * 3) != 0,
                          "trial %d repeats trial %d", i, j);
        y[i] = i % 5 == 4 ? NAN : -fabs(x[3 * i] - 0.6) - (x[3 * i + 1] > 0.7); /* pending */
    }
    space_free(&s);
}
END_TEST

START_TEST(grid_covers_its_grid)
{
    tune_space s;
    char err[256];
    ck_assert_int_eq(space_parse(&s, "--a int 1 3\n# a comment\n\n--b choice x y\n", know, err,
                                 sizeof err), 0);
    ck_assert_int_eq(suggest_grid_size(&s, 3), 6);
    int seen[3][2] = {{0}};
    for (long i = 0; i < 6; i++) {
        double u[2];
        char va[16], vb[16];
        ck_assert_int_eq(suggest_point(&s, ALGO_GRID, 5, i, 3, NULL, u), 0);
        int a = atoi(space_value(&s, 0, u[0], va, sizeof va));
        space_value(&s, 1, u[1], vb, sizeof vb);
        seen[a - 1][vb[0] == 'y']++;
    }
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 2; b++)
            ck_assert_int_eq(seen[a][b], 1);
    double u[2];
    ck_assert_int_eq(suggest_point(&s, ALGO_GRID, 5, 6, 3, NULL, u), 1);
    space_free(&s);
}
END_TEST

START_TEST(random_is_a_stream_per_trial)
{
    tune_space s;
    char err[256], v[32];
    ck_assert_int_eq(space_parse(&s, "--lr log 1e-4 0.3\n--momentum uniform 0 0.99\n", know, err,
                                 sizeof err), 0);
    double a[2], b[2], c[2];
    suggest_point(&s, ALGO_RANDOM, 11, 4, 3, NULL, a);
    suggest_point(&s, ALGO_RANDOM, 11, 5, 3, NULL, c);
    suggest_point(&s, ALGO_RANDOM, 11, 4, 3, NULL, b);
    ck_assert(a[0] == b[0] && a[1] == b[1] && a[0] != c[0]);
    double lr = atof(space_value(&s, 0, a[0], v, sizeof v));
    ck_assert(lr >= 1e-4 && lr <= 0.3);
    ck_assert_str_eq(space_value(&s, 0, 1.0, v, sizeof v), "0.3");
    space_free(&s);
}
END_TEST

START_TEST(space_refusals_name_the_line)
{
    tune_space s;
    char err[256];
    ck_assert_int_eq(space_parse(&s, "--lr log 1e-4 0.3\n--nosuch uniform 0 1\n", know, err,
                                 sizeof err), -1);
    ck_assert_msg(strstr(err, "line 2") && strstr(err, "no such flag"), "%s", err);
    space_parse(&s, "--lr log 0.3 0.3\n", know, err, sizeof err);
    ck_assert_msg(strstr(err, "line 1: empty range"), "%s", err);
    space_parse(&s, "\n--lr log 0 0.3\n", know, err, sizeof err);
    ck_assert_msg(strstr(err, "line 2") && strstr(err, "above 0"), "%s", err);
    space_parse(&s, "--lr gauss 0 1\n", know, err, sizeof err);
    ck_assert_msg(strstr(err, "unknown kind `gauss`"), "%s", err);
    space_parse(&s, "lr uniform 0 1\n", know, err, sizeof err);
    ck_assert_msg(strstr(err, "not a --flag"), "%s", err);
    ck_assert_int_eq(space_parse(&s, "# nothing\n", know, err, sizeof err), -1);
}
END_TEST

#define NAN_ NAN

START_TEST(asha_hand_trace)
{
    tsched s;
    char err[128], why[256];
    ck_assert_int_eq(tsched_parse(&s, "asha:eta=3,min=1,max=9", err, sizeof err), 0);
    ck_assert_int_eq(tsched_rung(&s, 1), 0);
    ck_assert_int_eq(tsched_rung(&s, 3), 1);
    ck_assert_int_eq(tsched_rung(&s, 9), -1); /* the end, not a rung */
    ck_assert_int_eq(tsched_rung(&s, 2), -1);
    double v[4][9];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 9; j++)
            v[i][j] = NAN_;
    tsched_curves c = {1, 9, &v[0][0]};
    v[0][0] = 0.5; /* alone at rung 0: its own cut-off */
    ck_assert_int_eq(tsched_decide(&s, &c, 0, 1, why, sizeof why), 0);
    c.ntrials = 2; /* {0.3, 0.5}: 2/3 percentile 0.4333 */
    v[1][0] = 0.3;
    ck_assert_int_eq(tsched_decide(&s, &c, 1, 1, why, sizeof why), 1);
    ck_assert_msg(strstr(why, "cut-off 0.433333 of 2"), "%s", why);
    c.ntrials = 3; /* {0.3, 0.5, 0.6}: 0.5333 */
    v[2][0] = 0.6;
    ck_assert_int_eq(tsched_decide(&s, &c, 2, 1, why, sizeof why), 0);
    c.ntrials = 4; /* {0.3, 0.5, 0.55, 0.6}: exactly 0.55, a tie goes on */
    v[3][0] = 0.55;
    ck_assert_int_eq(tsched_decide(&s, &c, 3, 1, why, sizeof why), 0);
    /* rung 1 at epoch 3: trial 0 first, then trial 2 below it */
    v[0][1] = 0.6, v[0][2] = 0.7;
    ck_assert_int_eq(tsched_decide(&s, &c, 0, 3, why, sizeof why), 0);
    v[2][1] = 0.62, v[2][2] = 0.65;
    ck_assert_int_eq(tsched_decide(&s, &c, 2, 3, why, sizeof why), 1);
    ck_assert_int_eq(tsched_decide(&s, &c, 0, 2, why, sizeof why), 0); /* not a rung */
    ck_assert_int_eq(tsched_parse(&s, "asha:eta=1", err, sizeof err), -1);
    ck_assert_int_eq(tsched_parse(&s, "hyperband", err, sizeof err), -1);
    ck_assert_int_eq(tsched_parse(&s, "asha:min=5,max=2", err, sizeof err), -1);
}
END_TEST

/* Promotion asha (eta 3, rungs 1 and 3, max 9), by hand: with 2 trials at rung 0
 * none is in the top floor(2/3) = 0; with 3 the best (trial 1) is promoted to 3;
 * with 6 the top 2 are trials 1 and 4, 1 is no longer paused there, so 4 goes;
 * with trial 1 paused at 3 among 3 at rung 1, it goes first (top rung first). */
START_TEST(asha_promote_hand_trace)
{
    tsched s;
    char err[128], why[256], buf[64];
    ck_assert_int_eq(tsched_parse(&s, "asha:eta=3,min=1,max=9,promote=1", err, sizeof err), 0);
    ck_assert_str_eq(tsched_format(&s, buf, sizeof buf), "asha:eta=3,min=1,max=9,promote=1");
    ck_assert_int_eq(tsched_first_target(&s), 1);
    double v[6][9];
    int paused[6] = {0};
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 9; j++)
            v[i][j] = NAN_;
    tsched_curves c = {2, 9, &v[0][0]};
    int to = 0;
    v[0][0] = 0.3, v[1][0] = 0.5;
    paused[0] = paused[1] = 1;
    ck_assert_int_eq(tsched_promote(&s, &c, paused, &to, why, sizeof why), -1);
    c.ntrials = 3;
    v[2][0] = 0.4, paused[2] = 1;
    ck_assert_int_eq(tsched_promote(&s, &c, paused, &to, why, sizeof why), 1);
    ck_assert_int_eq(to, 3);
    ck_assert_msg(strstr(why, "#1 of 3 (top 1): promoted to epoch 3"), "%s", why);
    paused[1] = 0; /* promoted: running to 3 */
    ck_assert_int_eq(tsched_promote(&s, &c, paused, &to, why, sizeof why), -1);
    c.ntrials = 6;
    v[3][0] = 0.2, v[4][0] = 0.45, v[5][0] = 0.45; /* a tie: the earlier trial */
    paused[3] = paused[4] = paused[5] = 1;
    ck_assert_int_eq(tsched_promote(&s, &c, paused, &to, why, sizeof why), 4);
    paused[4] = 0;
    ck_assert_int_eq(tsched_promote(&s, &c, paused, &to, why, sizeof why), -1);
    v[1][1] = v[1][2] = 0.7, paused[1] = 3;
    v[4][1] = v[4][2] = 0.6, paused[4] = 3;
    ck_assert_int_eq(tsched_promote(&s, &c, paused, &to, why, sizeof why), -1); /* 2 at rung 1 */
    v[0][1] = v[0][2] = 0.65, paused[0] = 3; /* (not a promoted one: the rule does not care) */
    ck_assert_int_eq(tsched_promote(&s, &c, paused, &to, why, sizeof why), 1);
    ck_assert_int_eq(to, 9);
    /* the stopping variant never promotes; promote=1 never stops a running trial */
    ck_assert_int_eq(tsched_decide(&s, &c, 3, 1, why, sizeof why), 0);
    ck_assert_int_eq(tsched_parse(&s, "asha:promote=2", err, sizeof err), -1);
    ck_assert_int_eq(tsched_parse(&s, "median:promote=1", err, sizeof err), -1);
    ck_assert_int_eq(tsched_parse(&s, "asha:eta=3,min=1,max=9", err, sizeof err), 0);
    ck_assert_int_eq(tsched_promote(&s, &c, paused, &to, why, sizeof why), -1);
    ck_assert_int_eq(tsched_first_target(&s), 9);
}
END_TEST

START_TEST(median_hand_trace)
{
    tsched s;
    char err[128], why[256];
    ck_assert_int_eq(tsched_parse(&s, "median:min=1,trials=2", err, sizeof err), 0);
    double v[3][3] = {{0.2, 0.4, 0.6}, {0.3, 0.5, 0.7}, {0.1, 0.3, NAN_}};
    tsched_curves c = {3, 3, &v[0][0]};
    /* running averages at epoch 2: 0.3 and 0.4, median 0.35; best 0.3 */
    ck_assert_int_eq(tsched_decide(&s, &c, 2, 2, why, sizeof why), 1);
    ck_assert_msg(strstr(why, "median 0.35 of 2"), "%s", why);
    v[2][1] = 0.36;
    ck_assert_int_eq(tsched_decide(&s, &c, 2, 2, why, sizeof why), 0);
    v[2][1] = 0.3;
    c.ntrials = 3;
    v[1][1] = NAN_; /* only one other trial reached epoch 2: too few */
    ck_assert_int_eq(tsched_decide(&s, &c, 2, 2, why, sizeof why), 0);
    ck_assert_int_eq(tsched_parse(&s, "fifo", err, sizeof err), 0);
    ck_assert_int_eq(tsched_decide(&s, &c, 2, 2, why, sizeof why), 0);
}
END_TEST

/* A host file in a temporary file; returns its path (static). */
static const char *hostfile(const char *text)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/pskv-unit-hosts-%d", (int)getpid());
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

START_TEST(tplace_host_file)
{
    tplace p;
    char why[400];
    const char *f = hostfile("# trials' hosts\nh0 scheduler servers=1\nh1 workers=2 # two\n"
                             "\nroot@h2 workers=3 advertise=10.0.0.2 port=7800\n");
    ck_assert_int_eq(tplace_init(&p, "ssh", f, "ssh -F cfg", "srun", why, sizeof why), 0);
    ck_assert_int_eq(p.nhosts, 2); /* h0 runs no worker */
    ck_assert_str_eq(p.hosts[0].dest, "h1");
    ck_assert_int_eq(p.hosts[0].slots, 2);
    ck_assert_str_eq(p.hosts[1].adv, "10.0.0.2");
    ck_assert_int_eq(p.hosts[1].line, 5);
    ck_assert_int_eq(p.ncmd, 5); /* ssh -F cfg -o BatchMode=yes */
    ck_assert_str_eq(p.cmd[4], "BatchMode=yes");
    ck_assert_int_eq(tplace_capacity(&p, 1), 5);
    ck_assert_int_eq(tplace_capacity(&p, 2), 2);
    int used[2] = {0, 0};
    ck_assert_int_eq(tplace_pick(&p, used, 1), 1); /* the most room */
    used[1] = 2;
    ck_assert_int_eq(tplace_pick(&p, used, 1), 0); /* ties: the file's order */
    used[0] = 2;
    ck_assert_int_eq(tplace_pick(&p, used, 1), 1);
    ck_assert_int_eq(tplace_pick(&p, used, 2), -1);
    ck_assert_int_eq(tplace_find(&p, "root@h2"), 1);
    ck_assert_int_eq(tplace_find(&p, "h9"), -1);
    tplace_fini(&p);
    const char *bad[][2] = {{"h1 slots=2\n", ":1: unknown word 'slots=2'"},
                            {"\nworkers=2\n", ":2: a line must start with the host"},
                            {"h1 workers=x\n", ":1: bad or repeated 'workers=x'"},
                            {"h1 workers=1\nh1 workers=2\n", ":2: host h1 is also on line 1"},
                            {"h1 scheduler servers=1\n", ":1: no host runs workers"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        f = hostfile(bad[i][0]);
        ck_assert_int_lt(tplace_init(&p, "ssh", f, "ssh", "srun", why, sizeof why), 0);
        ck_assert_msg(strstr(why, bad[i][1]), "%s: %s", bad[i][0], why);
        tplace_fini(&p);
    }
    unlink(f);
    ck_assert_int_lt(tplace_init(&p, "ssh", "", "ssh", "srun", why, sizeof why), 0);
    ck_assert_msg(strstr(why, "needs --hostfile"), "%s", why);
    ck_assert_int_lt(tplace_init(&p, "pbs", "", "ssh", "srun", why, sizeof why), 0);
    ck_assert_msg(strstr(why, "--launcher pbs: expected local, ssh or slurm"), "%s", why);
    ck_assert_int_lt(tplace_init(&p, "local", f, "ssh", "srun", why, sizeof why), 0);
    ck_assert_int_eq(tplace_init(&p, "slurm", "", "ssh", "srun -p x", why, sizeof why), 0);
    ck_assert_int_eq(tplace_capacity(&p, 4), INT32_MAX);
    tplace_fini(&p);
}
END_TEST

/* The remote command ssh is given, run by a local sh as the host's would: every
 * word arrives as it was (spaces, quotes, $), the rank's words last, and the pid
 * file is gone after. */
START_TEST(tplace_ssh_command_quotes_every_word)
{
    tplace p;
    char why[400], buf[4096], *argv[64], cmd[4300], out[256] = "";
    const char *f = hostfile("h1 workers=1 advertise=10.0.0.9\n");
    ck_assert_int_eq(tplace_init(&p, "ssh", f, "ssh", "srun", why, sizeof why), 0);
    unlink(f);
    char *w[] = {"printf", "%s|", "a b", "it's", "$HOME", "x\"y"};
    int n = tplace_argv(&p, 0, "abc-trial-7", w, 6, buf, sizeof buf, argv, 64);
    ck_assert_int_eq(n, 6); /* ssh -o BatchMode=yes h1 -- REMOTE */
    ck_assert_str_eq(argv[3], "h1");
    ck_assert_str_eq(argv[4], "--");
    snprintf(cmd, sizeof cmd, "%s --rank 3", argv[5]); /* what the host's shell runs */
    FILE *sh = popen(cmd, "r");
    ck_assert_ptr_nonnull(sh);
    ck_assert_ptr_nonnull(fgets(out, sizeof out, sh));
    ck_assert_int_eq(pclose(sh), 0);
    ck_assert_str_eq(out, "a b|it's|$HOME|x\"y|--advertise|10.0.0.9|--rank|3|");
    ck_assert_int_ne(access("/tmp/pskv-tune-abc-trial-7.3.pid", F_OK), 0);
    tplace_fini(&p);
    ck_assert_int_eq(tplace_init(&p, "slurm", "", "ssh", "srun -p x", why, sizeof why), 0);
    n = tplace_argv(&p, 0, "abc-trial-7", w, 2, buf, sizeof buf, argv, 64);
    ck_assert_int_eq(n, 8); /* srun -p x --ntasks=1 --job-name=GROUP --quiet WORKER... */
    ck_assert_str_eq(argv[4], "--job-name=abc-trial-7");
    ck_assert_str_eq(argv[6], "printf");
    tplace_fini(&p);
}
END_TEST

Suite *tune_suite(void)
{
    Suite *s = suite_create("tune");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, gp_one_point_closed_form);
    tcase_add_test(tc, gp_two_points_closed_form);
    tcase_add_test(tc, ei_closed_form);
    tcase_add_test(tc, gp_finds_quadratic_optimum);
    tcase_add_test(tc, gp_many_equals_one_and_ard_finds_the_flat_dimension);
    tcase_add_test(tc, gp_never_repeats_a_discrete_point);
    tcase_add_test(tc, grid_covers_its_grid);
    tcase_add_test(tc, random_is_a_stream_per_trial);
    tcase_add_test(tc, space_refusals_name_the_line);
    tcase_add_test(tc, asha_hand_trace);
    tcase_add_test(tc, asha_promote_hand_trace);
    tcase_add_test(tc, median_hand_trace);
    tcase_add_test(tc, tplace_host_file);
    tcase_add_test(tc, tplace_ssh_command_quotes_every_word);
    suite_add_tcase(s, tc);
    return s;
}
