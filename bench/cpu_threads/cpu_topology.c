// cpu_topology.c: the machine's CPUs and NUMA nodes for bench_cpu_threads (cpu_topology.h).
#include "bench/cpu_threads/cpu_topology.h"

#include "kernels/error.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

// set_mempolicy's modes (linux/mempolicy.h), without libnuma
#define POLICY_DEFAULT 0
#define POLICY_BIND 2

uint64_t cpu_usable_mask(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
    uint64_t mask = 0;
    for (int i = 0; i < 64; i++)
        if (CPU_ISSET(i, &set)) mask |= (uint64_t)1 << i;
    return mask ? mask : 1;
}

uint64_t cpu_mask_lowest(uint64_t mask, int n)
{
    uint64_t out = 0;
    for (int i = 0; i < 64 && n > 0; i++)
        if (mask >> i & 1) {
            out |= (uint64_t)1 << i;
            n--;
        }
    return out;
}

// One number of a CPU list at *p; -1 when there is none.
static long list_number(const char **p)
{
    if (!isdigit((unsigned char)**p)) return -1;
    char *end;
    long v = strtol(*p, &end, 10);
    *p = end;
    return v;
}

int cpu_list_parse(const char *text, uint64_t *mask)
{
    *mask = 0;
    const char *p = text;
    while (*p && *p != '\n') {
        long lo = list_number(&p), hi = lo;
        if (lo < 0) return -1;
        if (*p == '-') {
            p++;
            if ((hi = list_number(&p)) < lo) return -1;
        }
        for (long i = lo; i <= hi && i < 64; i++) *mask |= (uint64_t)1 << i;
        if (*p == ',') p++;
        else if (*p && *p != '\n') return -1;
    }
    return 0;
}

void cpu_list_format(uint64_t mask, char *buf, size_t size)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < 64; i++) {
        if (!(mask >> i & 1)) continue;
        int j = i;
        while (j + 1 < 64 && (mask >> (j + 1) & 1)) j++;
        int w = j > i ? snprintf(buf + at, size - at, "%s%d-%d", at ? "," : "", i, j)
                      : snprintf(buf + at, size - at, "%s%d", at ? "," : "", i);
        if (w < 0 || (size_t)w >= size - at) break;
        at += (size_t)w;
        i = j;
    }
    if (!at) snprintf(buf, size, "none");
}

static int compare_ints(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

// Node `id`'s CPU list under root into *cpus. 0 or -1 with the error set.
static int node_cpus(const char *root, int id, uint64_t *cpus)
{
    char path[4200], text[4096];
    snprintf(path, sizeof path, "%s/node%d/cpulist", root, id);
    FILE *f = fopen(path, "r");
    if (!f) return error_set(ERROR_IO, "numa: cannot read %s: %s", path, strerror(errno));
    size_t got = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[got] = '\0';
    if (cpu_list_parse(text, cpus) != 0)
        return error_set(ERROR_BAD_DATA, "numa: %s is not a CPU list: '%.60s'", path, text);
    return 0;
}

int numa_nodes(const char *root, int *ids, uint64_t *cpus, int max)
{
    DIR *d = opendir(root);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        const char *p = e->d_name + 4;
        if (strncmp(e->d_name, "node", 4) != 0 || !*p || strspn(p, "0123456789") != strlen(p)) continue;
        ids[n++] = atoi(p);
    }
    closedir(d);
    qsort(ids, (size_t)n, sizeof *ids, compare_ints);
    for (int k = 0; k < n; k++)
        if (node_cpus(root, ids[k], &cpus[k]) != 0) return -1;
    return n;
}

int numa_bind_memory(int node)
{
    unsigned long nodes[CPU_TOPOLOGY_MAX_NODES / (8 * sizeof(unsigned long)) + 1] = {0};
    if (node >= CPU_TOPOLOGY_MAX_NODES) {
        errno = EINVAL;
        return -1;
    }
    if (node >= 0) nodes[node / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
    long rc = node >= 0 ? syscall(SYS_set_mempolicy, POLICY_BIND, nodes, (unsigned long)CPU_TOPOLOGY_MAX_NODES + 1)
                        : syscall(SYS_set_mempolicy, POLICY_DEFAULT, NULL, 0UL);
    return rc == 0 ? 0 : -1;
}

// The parent and the CPU it last ran on of process `pid` (/proc/PID/stat fields 4 and 39).
static int process_parent_and_cpu(long pid, long *ppid, int *cpu)
{
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t got = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[got] = '\0';
    const char *p = strrchr(text, ')');  // the command name may hold anything but this last ')'
    if (!p) return -1;
    p++;
    // fields from 3 (state) on, separated by single spaces
    for (int field = 3; *p; field++) {
        while (*p == ' ') p++;
        if (field == 4) *ppid = strtol(p, NULL, 10);
        if (field == 39) {
            *cpu = (int)strtol(p, NULL, 10);
            return 0;
        }
        while (*p && *p != ' ') p++;
    }
    return -1;
}

int cpu_children(uint64_t *allowed, uint64_t *last)
{
    *allowed = *last = 0;
    DIR *d = opendir("/proc");
    if (!d) return 0;
    long self = (long)getpid();
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!isdigit((unsigned char)e->d_name[0])) continue;
        long pid = strtol(e->d_name, NULL, 10), ppid = 0;
        int cpu = -1;
        if (process_parent_and_cpu(pid, &ppid, &cpu) != 0 || ppid != self) continue;
        cpu_set_t set;
        if (sched_getaffinity((pid_t)pid, sizeof set, &set) != 0) continue;
        for (int i = 0; i < 64; i++)
            if (CPU_ISSET(i, &set)) *allowed |= (uint64_t)1 << i;
        if (cpu >= 0 && cpu < 64) *last |= (uint64_t)1 << cpu;
        count++;
    }
    closedir(d);
    return count;
}
