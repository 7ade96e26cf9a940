// cpu_topology.h: what bench_cpu_threads needs to know about the machine's CPUs, as masks
// of the first 64 CPUs (bit i: CPU i): the CPUs this process may use, the NUMA nodes of a
// sysfs-like directory (/sys/devices/system/node) and where the process's children (the
// loader's workers) may run and last ran.
#ifndef CPU_TOPOLOGY_H
#define CPU_TOPOLOGY_H

#include <stddef.h>
#include <stdint.h>

#define CPU_TOPOLOGY_MAX_NODES 64

// The CPUs the calling thread may run on (sched_getaffinity: taskset, cgroup cpusets); 1
// (CPU 0) when it cannot say.
uint64_t cpu_usable_mask(void);

// The n lowest CPUs of mask (all of them when it has fewer).
uint64_t cpu_mask_lowest(uint64_t mask, int n);

// Parses a kernel CPU list ("0-3,8,10-11\n", "" for none) into a mask; CPUs of 64 and over
// are left out. 0, or -1 when the text is not a CPU list.
int cpu_list_parse(const char *text, uint64_t *mask);

// Writes mask as a CPU list ("0-1,3"; "none" for 0) into buf.
void cpu_list_format(uint64_t mask, char *buf, size_t size);

// The NUMA nodes under root (its nodeN folders, each with a cpulist file), in ascending
// id, at most max: ids[k] and cpus[k]. Returns how many (0 when root is missing), or -1 with
// the error set when a cpulist cannot be read or parsed.
int numa_nodes(const char *root, int *ids, uint64_t *cpus, int max);

// Binds the calling thread's future memory to NUMA node `node` (set_mempolicy MPOL_BIND,
// as numactl --membind), or back to the default policy with node < 0. 0 or -1 (errno).
int numa_bind_memory(int node);

// Over the process's child processes now (every thread's children): the union of the CPUs
// they may run on (*allowed) and of the CPU each last ran on (*last); returns how many.
int cpu_children(uint64_t *allowed, uint64_t *last);

#endif
