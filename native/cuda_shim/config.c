/* Reading the shim's configuration: a small key=value file the executor writes.
 *
 * The file sits at a fixed path (SHIM_CONFIG_PATH) that the executor bind-mounts read-only,
 * so a job cannot raise its limit. DLC_SHIM_CONFIG names another file only when the fixed
 * one does not exist (tests, and hosts that are not DLC containers).
 *
 *   state_file=/run/dlc-shim/accounting   shared accounting file (on the per-task tmpfs)
 *   context_mib=300                        counted per process and GPU once it has a context
 *   limit_mib=4096                         every device ordinal
 *   limit_mib.1=2048                       one device ordinal
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"

void shim_log(const char *fmt, ...) {
    char line[512];
    int n = snprintf(line, sizeof line, "dlc-cuda-shim[%d]: ", (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n - 2, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t ignored = write(2, line, (size_t)n);
    (void)ignored;
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    char *end = s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' || end[-1] == '\r'))
        *--end = '\0';
    return s;
}

static int parse_u64(const char *text, uint64_t *out) {
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || *trim(end) != '\0') return 0;
    *out = v;
    return 1;
}

static void apply(ShimConfig *cfg, char *key, char *value) {
    uint64_t v = 0;
    if (strcmp(key, "state_file") == 0) {
        snprintf(cfg->state_file, sizeof cfg->state_file, "%s", value);
    } else if (strcmp(key, "context_mib") == 0 && parse_u64(value, &v)) {
        cfg->context_bytes = v << 20;
    } else if (strcmp(key, "limit_mib") == 0 && parse_u64(value, &v)) {
        for (int i = 0; i < SHIM_MAX_DEV; i++) cfg->limit[i] = v << 20;
    } else if (strncmp(key, "limit_mib.", 10) == 0 && parse_u64(value, &v)) {
        uint64_t dev = 0;
        if (parse_u64(key + 10, &dev) && dev < SHIM_MAX_DEV) cfg->limit[dev] = v << 20;
    } else if (strcmp(key, "debug") == 0 && parse_u64(value, &v)) {
        cfg->debug = (int)v;
    } else {
        shim_log("config: ignoring %s=%s", key, value);
    }
}

void shim_config_load(ShimConfig *cfg) {
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < SHIM_MAX_DEV; i++) cfg->limit[i] = SHIM_UNLIMITED;
    FILE *f = fopen(SHIM_CONFIG_PATH, "re");
    if (f == NULL) {
        const char *alt = getenv("DLC_SHIM_CONFIG");
        if (alt != NULL && *alt) f = fopen(alt, "re");
    }
    if (f == NULL) return; /* no config: pass-through, nothing limited */
    cfg->loaded = 1;
    char line[640];
    /* limit_mib lines apply in file order; "limit_mib" after "limit_mib.N" overrides it */
    while (fgets(line, sizeof line, f) != NULL) {
        char *text = trim(line);
        if (*text == '#' || *text == '\0') continue;
        char *eq = strchr(text, '=');
        if (eq == NULL) continue;
        *eq = '\0';
        apply(cfg, trim(text), trim(eq + 1));
    }
    fclose(f);
}
