#include "grow.h"

#include <stdint.h>
#include <stdlib.h>

#include "pskv_errors.h"

int grow_array(void **buf, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem)
            return -PSKV_ENOMEM;
        c *= 2;
    }
    void *g = realloc(*buf, c * elem);
    if (!g)
        return -PSKV_ENOMEM;
    *buf = g;
    *cap = c;
    return 0;
}
