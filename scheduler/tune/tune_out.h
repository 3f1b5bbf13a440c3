/* What pskv-tune shows of a study: status (a table of trials), export --csv (one
 * row per trial) and plot (gnuplot: validation curves coloured by fate, best so
 * far against epochs spent and against wall time, parallel coordinates). They
 * open the study read-only: the running tuner is never blocked (study.h).
 *
 * OWNS nothing across calls. THREAD: the caller's. NEVER writes the study. */
#ifndef PSKV_TUNE_OUT_H
#define PSKV_TUNE_OUT_H

/* Each returns the exit status: 0, or 1 after saying why on stderr. */
int tune_status(const char *path, void *stream);
int tune_export_csv(const char *path, void *stream);
/* out "" writes PATH.png. */
int tune_plot(const char *path, const char *out);

#endif
