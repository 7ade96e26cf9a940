// context_main.c: build/context prints the device and library context of this
// machine, or with --slug the results-folder name the suite uses for it.
#include <stdio.h>
#include <string.h>

#include "bench/driver/context.h"

int main(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: %s [--slug]\n"
               "  (no flag)  print key=value lines: GPU, driver, CUDA runtime, cuBLAS,\n"
               "             cuDNN, NCCL versions and the host\n"
               "  --slug     print the results-folder slug: <gpu>_<driver>, or cpu_<host>\n",
               argv[0]);
        return 0;
    }
    if (argc > 2) {
        fprintf(stderr, "%s: unexpected argument '%s' (try --help)\n", argv[0], argv[2]);
        return 2;
    }
    SuiteContext c;
    context_collect(&c);
    if (argc > 1 && strcmp(argv[1], "--slug") == 0) {
        char slug[192];
        context_slug(&c, slug, sizeof slug);
        printf("%s\n", slug);
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "%s: unknown flag '%s' (try --help)\n", argv[0], argv[1]);
        return 2;
    }
    for (int i = 0; i < c.count; i++) printf("%s=%s\n", c.keys[i], c.values[i]);
    if (!c.has_gpu) printf("no_gpu_reason=%s\n", c.no_gpu_reason);
    return 0;
}
