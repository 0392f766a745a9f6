/* Device memory accounting across all the processes of one container.
 *
 * One file (on the tmpfs the executor mounts per task) holds a slot per (pid, device) with the
 * bytes that process counts on that device. Every process of the container maps it shared.
 * Updates happen under flock(2) on the file (released by the kernel when a holder dies, so a
 * SIGKILL'd process never wedges the others) plus a process-local mutex (flock does not
 * exclude two threads of one process: they share the open file description).
 *
 * A slot of a process that has gone (no /proc/<pid>, a zombie, or the pid reused by a process
 * with another start time) is reclaimed when an allocation would otherwise be refused and
 * when cuMemGetInfo is answered: the driver freed that memory when the process ended.
 *
 * Without a state file (not configured, or it cannot be opened) the accounting is per process:
 * the limit still holds for each process, not for their sum (a warning says so).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

#define MAGIC 0x444c43534853494dULL /* "DLCSHSIM" */
#define VERSION 1
#define MAX_SLOTS 4096

typedef struct {
    int32_t pid;
    int32_t dev;
    uint64_t start; /* /proc/<pid>/stat starttime: tells a reused pid apart */
    uint64_t bytes;
} Slot;

typedef struct {
    uint64_t magic;
    uint32_t version;
    uint32_t high; /* slots [0, high) have ever been used: the scan stops there */
    Slot slots[MAX_SLOTS];
} Shared;

static pthread_mutex_t local_lock = PTHREAD_MUTEX_INITIALIZER;
static const ShimConfig *config;
static Shared *shared;        /* NULL: per-process accounting */
static Shared private_state;  /* used when there is no shared file */
static int state_fd = -1;
static int opened;            /* tried to open the state file in this process */
static int my_slot[SHIM_MAX_DEV];
static uint64_t my_start;

static uint64_t start_time_of(int pid, char *state) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (p == NULL) return 0;
    p += 2;                      /* field 3, the state */
    if (state) *state = *p;
    for (int field = 3; field < 22 && p; field++) {
        p = strchr(p, ' ');
        if (p) p++;
    }
    return p ? strtoull(p, NULL, 10) : 0;
}

static int alive(const Slot *s) {
    if (kill(s->pid, 0) != 0 && errno == ESRCH) return 0;
    char state = '?';
    uint64_t start = start_time_of(s->pid, &state);
    if (start == 0) {
        /* no /proc entry although kill() found it: trust kill() unless /proc is mounted */
        return access("/proc/self/stat", F_OK) != 0;
    }
    if (state == 'Z' || state == 'X') return 0; /* exited, not reaped: the driver freed it */
    return s->start == 0 || start == s->start;
}

static void reclaim_dead(void) {
    for (uint32_t i = 0; i < shared->high; i++) {
        Slot *s = &shared->slots[i];
        if (s->pid != 0 && !alive(s)) {
            if (config && config->debug && s->bytes)
                shim_log("reclaimed %llu MiB of gone pid %d on GPU %d",
                         (unsigned long long)(s->bytes >> 20), s->pid, s->dev);
            memset(s, 0, sizeof *s);
        }
    }
}

static void open_state(void) {
    opened = 1;
    for (int i = 0; i < SHIM_MAX_DEV; i++) my_slot[i] = -1;
    my_start = start_time_of(getpid(), NULL);
    shared = &private_state;
    if (config == NULL || config->state_file[0] == '\0') return;
    int fd = open(config->state_file, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        shim_log("cannot open %s (%s): limits hold per process only", config->state_file,
                 strerror(errno));
        return;
    }
    fchmod(fd, 0666); /* every uid of the container shares it (umask may have narrowed it) */
    flock(fd, LOCK_EX);
    off_t size = lseek(fd, 0, SEEK_END);
    if (size < (off_t)sizeof(Shared) && ftruncate(fd, sizeof(Shared)) != 0) {
        shim_log("cannot size %s: limits hold per process only", config->state_file);
        flock(fd, LOCK_UN);
        close(fd);
        return;
    }
    void *map = mmap(NULL, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        flock(fd, LOCK_UN);
        close(fd);
        return;
    }
    Shared *s = map;
    if (s->magic != MAGIC || s->version != VERSION) { /* new (zeroed) or foreign: start over */
        memset(s, 0, sizeof *s);
        s->magic = MAGIC;
        s->version = VERSION;
    }
    flock(fd, LOCK_UN);
    shared = s;
    state_fd = fd;
}

static void lock(void) {
    pthread_mutex_lock(&local_lock);
    if (!opened) open_state();
    if (state_fd >= 0) flock(state_fd, LOCK_EX);
}

static void unlock(void) {
    if (state_fd >= 0) flock(state_fd, LOCK_UN);
    pthread_mutex_unlock(&local_lock);
}

static uint64_t sum(int dev) {
    uint64_t total = 0;
    for (uint32_t i = 0; i < shared->high; i++)
        if (shared->slots[i].pid != 0 && shared->slots[i].dev == dev)
            total += shared->slots[i].bytes;
    return total;
}

static Slot *own_slot(int dev) {
    int mine = my_slot[dev];
    int pid = (int)getpid();
    if (mine >= 0 && shared->slots[mine].pid == pid && shared->slots[mine].dev == dev)
        return &shared->slots[mine];
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < MAX_SLOTS; i++) {
            Slot *s = &shared->slots[i];
            if (s->pid != 0) continue;
            s->pid = pid;
            s->dev = dev;
            s->start = my_start;
            s->bytes = 0;
            if (i >= shared->high) shared->high = i + 1;
            my_slot[dev] = (int)i;
            return s;
        }
        reclaim_dead();
    }
    return NULL;
}

void shim_account_init(const ShimConfig *cfg) { config = cfg; }

/* One refusal line per second and process at most: a program that retries in a loop must
 * not flood its stderr (the refusals themselves are never skipped). */
static int log_refusal(void) {
    static time_t last;
    static long skipped;
    time_t now = time(NULL);
    if (now == last) {
        skipped++;
        return 0;
    }
    if (skipped) shim_log("(%ld more refusals in the last second)", skipped);
    last = now;
    skipped = 0;
    return 1;
}

uint64_t shim_limit(int dev) {
    if (config == NULL || dev < 0 || dev >= SHIM_MAX_DEV) return SHIM_UNLIMITED;
    return config->limit[dev];
}

CUresult shim_reserve(int dev, uint64_t bytes, const char *what) {
    if (dev < 0 || dev >= SHIM_MAX_DEV) return CUDA_SUCCESS; /* not a device we can name */
    uint64_t limit = shim_limit(dev);
    lock();
    uint64_t used = sum(dev);
    if (limit != SHIM_UNLIMITED && (bytes > limit || used > limit - bytes)) {
        reclaim_dead();
        used = sum(dev);
        if (bytes > limit || used > limit - bytes) {
            unlock();
            if (!log_refusal()) return CUDA_ERROR_OUT_OF_MEMORY;
            shim_log("%s of %llu MiB refused on GPU %d: share %llu MiB, %llu MiB in use "
                     "(CUDA_ERROR_OUT_OF_MEMORY)",
                     what, (unsigned long long)((bytes + (1 << 20) - 1) >> 20), dev,
                     (unsigned long long)(limit >> 20), (unsigned long long)(used >> 20));
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    Slot *s = own_slot(dev);
    if (s == NULL) {
        unlock();
        shim_log("%s refused: the accounting file has no free slot", what);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    s->bytes += bytes;
    unlock();
    return CUDA_SUCCESS;
}

void shim_unreserve(int dev, uint64_t bytes) {
    if (dev < 0 || dev >= SHIM_MAX_DEV) return;
    lock();
    Slot *s = own_slot(dev);
    if (s != NULL) s->bytes = s->bytes > bytes ? s->bytes - bytes : 0;
    unlock();
}

uint64_t shim_used(int dev) {
    if (dev < 0 || dev >= SHIM_MAX_DEV) return 0;
    lock();
    reclaim_dead();
    uint64_t used = sum(dev);
    unlock();
    return used;
}

/* In a forked child: its own open file description (a shared one would let parent and child
 * hold the flock at once), no slots of its own (the parent's allocations stay the parent's). */
void shim_account_after_fork(void) {
    pthread_mutex_init(&local_lock, NULL);
    if (state_fd >= 0) {
        close(state_fd);
        state_fd = -1;
    }
    if (shared != NULL && shared != &private_state) munmap(shared, sizeof(Shared));
    shared = NULL;
    opened = 0;
    memset(&private_state, 0, sizeof private_state);
}
