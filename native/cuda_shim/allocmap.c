/* This process's live allocations: device pointer or VMM handle -> (bytes, device).
 *
 * The free entry points carry only the pointer or handle, so what to give back to the
 * accounting is looked up here. Open addressing with linear probing and tombstones; grows at
 * half full. Guarded by its own mutex (allocations come from many threads).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

typedef struct {
    uint64_t key;
    uint64_t bytes;
    int32_t kind; /* 0 empty, -1 tombstone, else kind + 1 */
    int32_t dev;
} Entry;

static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;
static Entry *table;
static size_t capacity, used_slots;

static size_t hash(uint64_t key, int kind) {
    key ^= (uint64_t)kind * 0x9e3779b97f4a7c15ULL;
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)key;
}

static int grow(void) {
    size_t old_capacity = capacity;
    Entry *old = table;
    size_t next = capacity ? capacity * 2 : 1024;
    Entry *fresh = calloc(next, sizeof(Entry));
    if (fresh == NULL) return 0;
    table = fresh;
    capacity = next;
    used_slots = 0;
    for (size_t i = 0; i < old_capacity; i++) {
        if (old[i].kind <= 0) continue;
        size_t j = hash(old[i].key, old[i].kind) & (capacity - 1);
        while (table[j].kind != 0) j = (j + 1) & (capacity - 1);
        table[j] = old[i];
        used_slots++;
    }
    free(old);
    return 1;
}

void shim_map_put(uint64_t key, int kind, uint64_t bytes, int dev) {
    pthread_mutex_lock(&map_lock);
    if ((used_slots + 1) * 2 > capacity && !grow()) {
        pthread_mutex_unlock(&map_lock);
        return; /* out of host memory: the bytes stay counted until the process ends */
    }
    size_t j = hash(key, kind + 1) & (capacity - 1);
    while (table[j].kind > 0) j = (j + 1) & (capacity - 1);
    if (table[j].kind == 0) used_slots++;
    table[j] = (Entry){key, bytes, kind + 1, dev};
    pthread_mutex_unlock(&map_lock);
}

int shim_map_take(uint64_t key, int kind, uint64_t *bytes, int *dev) {
    int found = 0;
    pthread_mutex_lock(&map_lock);
    if (capacity) {
        size_t j = hash(key, kind + 1) & (capacity - 1);
        for (size_t n = 0; n < capacity && table[j].kind != 0; n++, j = (j + 1) & (capacity - 1)) {
            if (table[j].kind == kind + 1 && table[j].key == key) {
                *bytes = table[j].bytes;
                *dev = table[j].dev;
                table[j].kind = -1;
                found = 1;
                break;
            }
        }
    }
    pthread_mutex_unlock(&map_lock);
    return found;
}

void shim_map_clear(void) {
    pthread_mutex_init(&map_lock, NULL);
    free(table);
    table = NULL;
    capacity = used_slots = 0;
}
