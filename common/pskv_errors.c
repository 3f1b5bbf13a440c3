#include "pskv_errors.h"

static const char *const messages[PSKV_ERROR_MAX] = {
    [PSKV_OK] = "success",
    [PSKV_EINVAL] = "invalid argument",
    [PSKV_ENOMEM] = "out of memory",
    [PSKV_ETIMEDOUT] = "timed out",
    [PSKV_EPROTO] = "protocol error",
    [PSKV_EVERSION] = "protocol version mismatch",
    [PSKV_EJOB] = "job id mismatch",
    [PSKV_ENOTABLE] = "unknown table",
    [PSKV_ERANGE] = "key out of range",
    [PSKV_EMISMATCH] = "table options differ",
    [PSKV_EREFUSED] = "refused",
    [PSKV_ENET] = "network error",
    [PSKV_ECLOSED] = "closed",
    [PSKV_ENOTFOUND] = "not found",
    [PSKV_EBADVALUE] = "non-finite value",
    [PSKV_EIO] = "I/O error",
    [PSKV_ELATE] = "dropped: late",
    [PSKV_EPEERDEAD] = "a peer worker died",
    [PSKV_ESTALE] = "stale view or expired lease",
    [PSKV_ELOST] = "partition lost",
    [PSKV_ENOTREADY] = "partition not ready",
    [PSKV_EPERM] = "not permitted for this key's role",
    [PSKV_ENOSHM] = "shared memory refused by the peer: values go over TCP",
    [PSKV_ESHMREF] = "bad shared-memory reference",
    [PSKV_EQUOTA] = "namespace quota exceeded",
    [PSKV_EACCES] = "namespace not bound to this key, or read-only",
    [PSKV_EKEYMISS] = "key list signature not held by the receiver (keycache): send the keys",
};

const char *pskv_strerror(int code)
{
    long long c = code; /* -INT_MIN does not fit an int */
    if (c < 0)
        c = -c;
    if (c >= PSKV_ERROR_MAX)
        return "unknown error";
    return messages[c] ? messages[c] : "unknown error"; /* a number not (yet) given out */
}
