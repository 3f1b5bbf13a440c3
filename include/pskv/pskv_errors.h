/* pskv error codes. Calls that can fail return 0 (or a non-negative result) on
 * success and a negated code on failure: `return -PSKV_ETIMEDOUT;`. Installed
 * with include/pskv/pskv.h: the codes and their numbers are part of the public API.
 *
 * OWNS   nothing but a static table of messages.
 * THREAD any.
 * NEVER  allocates; the strings pskv_strerror returns are static, never NULL. */
#ifndef PSKV_ERRORS_H
#define PSKV_ERRORS_H

#ifdef __cplusplus
extern "C" {
#endif

enum pskv_error {
    PSKV_OK = 0,
    PSKV_EINVAL = 1,      /* invalid argument or option */
    PSKV_ENOMEM = 2,      /* out of memory */
    PSKV_ETIMEDOUT = 3,   /* a wait passed its time-out */
    PSKV_EPROTO = 4,      /* malformed or unexpected message */
    PSKV_EVERSION = 5,    /* peer speaks another protocol version */
    PSKV_EJOB = 6,        /* peer belongs to another job */
    PSKV_ENOTABLE = 7,    /* unknown table */
    PSKV_ERANGE = 8,      /* key outside the receiver's ranges or the table */
    PSKV_EMISMATCH = 9,   /* table reopened with different options */
    PSKV_EREFUSED = 10,   /* registration refused (rank taken, cluster full) */
    PSKV_ENET = 11,       /* ZeroMQ or socket error */
    PSKV_ECLOSED = 12,    /* the job is over or the handle is closed */
    PSKV_ENOTFOUND = 13,  /* no such timestamp, node or interface */
    PSKV_EBADVALUE = 14,  /* non-finite value (NaN or infinity) in a push */
    PSKV_EIO = 15,        /* file I/O error */
    PSKV_ELATE = 16,      /* bsp with backup workers: the push's clock had closed: dropped */
    PSKV_ESTALE = 17,     /* the request's view epoch is not the receiver's, or its lease
                             expired: re-resolve the owner from the latest view and retry */
    PSKV_ELOST = 18,      /* no live replica holds the keys' partition whole: the data is gone */
    PSKV_ENOTREADY = 19,  /* the partition is still being copied to this server: retry */
    PSKV_EPERM = 20,      /* not permitted: the sender's key does not carry the role this needs */
    PSKV_EPEERDEAD = 21,  /* pskv_allreduce: a worker of the ring died or left (the message
                             names its rank) */
    PSKV_EKEYMISS = 22,   /* keycache: the receiver does not hold the key list signed so: send it */
    PSKV_ENOSHM = 25,     /* shared memory refused (another host or user, cannot map): send
                             the values over TCP */
    PSKV_ESHMREF = 26,    /* a shared-memory reference outside its segment or malformed */
    PSKV_EQUOTA = 31,     /* a push would create rows past its namespace's --quota-bytes:
                             refused whole, nothing stored is lost (the message names it) */
    PSKV_EACCES = 32,     /* the sender's key is not bound to the table's namespace, or is
                             a reader's and the request writes (authorized file) */
    PSKV_ELOCKED = 34,    /* pskv-tune: the study is being run by another live pskv-tune */
    PSKV_ERROR_MAX
};

/* Returns a static description of `code` (positive or negated). Never NULL. */
const char *pskv_strerror(int code);

#ifdef __cplusplus
}
#endif
#endif
