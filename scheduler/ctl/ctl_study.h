/* ctl_study: `pskvctl status --study STUDY.db`, a pskv-tune study in pskvctl.
 * Until trials run as worker groups of one server group (issue 35) each trial is
 * a job with its own scheduler, so no scheduler knows the study: the study file
 * is its one record. pskvctl therefore shows it by running `pskv-tune status
 * STUDY.db` (the binary beside pskvctl's own, else PATH), the same table, read
 * without blocking a running tuner (SQLite WAL), and links no SQLite itself.
 *
 * OWNS nothing. THREAD the caller's. */
#ifndef PSKV_CTL_STUDY_H
#define PSKV_CTL_STUDY_H

/* Replaces this process with pskv-tune status STUDY; returns (exit status 1,
 * after printing why) only when pskv-tune cannot be run. */
int ctl_study_status(const char *study);

#endif
