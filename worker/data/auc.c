/* AUC by the rank-sum (auc.h). */
#include "auc.h"

#include <math.h>
#include <stdlib.h>

static int cmp_score(const void *a, const void *b)
{
    double x = ((const auc_item *)a)->score, y = ((const auc_item *)b)->score;
    return x < y ? -1 : x > y;
}

double auc_rank_sum(auc_item *v, size_t n)
{
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof *v, cmp_score);
    double pos = 0, rank_sum = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && v[j].score == v[i].score)
            j++;
        double avg = (double)(i + 1 + j) / 2.0; /* ranks i+1..j */
        for (size_t k = i; k < j; k++)
            if (v[k].label) {
                pos++;
                rank_sum += avg;
            }
        i = j;
    }
    double neg = (double)n - pos;
    if (pos == 0 || neg == 0)
        return NAN;
    return (rank_sum - pos * (pos + 1) / 2.0) / (pos * neg);
}
