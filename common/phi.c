/* The phi-accrual failure detector (phi.h). */
#include "phi.h"

#include <math.h>

#define PHI_A 1.5976   /* z = y (A + B y^2): the logistic fit of the normal tail */
#define PHI_B 0.070566
#define LN10 2.302585092994045684

void phi_init(phi_window *w, double prior_ms, double min_sd_ms)
{
    *w = (phi_window){.prior_ms = prior_ms > 0 ? prior_ms : 1,
                      .min_sd_ms = min_sd_ms > 0 ? min_sd_ms : 1};
}

void phi_add(phi_window *w, double gap_ms)
{
    w->gaps[w->next] = gap_ms < 0 ? 0 : gap_ms;
    w->next = (w->next + 1) % PHI_WINDOW;
    if (w->n < PHI_WINDOW)
        w->n++;
    w->total++;
}

double phi_mean(const phi_window *w)
{
    if (!w->n)
        return w->prior_ms;
    double s = 0;
    for (uint32_t i = 0; i < w->n; i++)
        s += w->gaps[i];
    return s / w->n;
}

double phi_sd(const phi_window *w)
{
    double sd = 0;
    if (w->n > 1) {
        double m = phi_mean(w), v = 0;
        for (uint32_t i = 0; i < w->n; i++)
            v += (w->gaps[i] - m) * (w->gaps[i] - m);
        sd = sqrt(v / w->n);
    }
    return sd > w->min_sd_ms ? sd : w->min_sd_ms;
}

double phi_value(const phi_window *w, double elapsed_ms)
{
    double y = (elapsed_ms - phi_mean(w)) / phi_sd(w);
    double z = y * (PHI_A + PHI_B * y * y);
    /* log10(1 + e^z) without overflow for large z */
    return z > 0 ? z / LN10 + log10(1 + exp(-z)) : log10(1 + exp(z));
}

double phi_time_to(const phi_window *w, double threshold)
{
    /* log10(1 + e^z) = T  =>  z = ln(10^T - 1); then B y^3 + A y - z = 0 */
    double z = threshold > 15 ? threshold * LN10 : log(pow(10, threshold) - 1);
    double p = PHI_A / PHI_B, q = -z / PHI_B;
    double d = sqrt(q * q / 4 + p * p * p / 27);
    double y = cbrt(-q / 2 + d) + cbrt(-q / 2 - d);
    return phi_mean(w) + y * phi_sd(w);
}
