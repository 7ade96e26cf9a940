// token_file.c: a user's token file for train (token_file.h).
#include "bench/tools/token_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/error.h"
#include "kernels/rng.h"

#define LLMC_HEADER_INTS 256

static int read_all(const char *path, unsigned char **data, size_t *size)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return error_set(ERROR_IO, "token file %s: %s", path, strerror(errno));
    *data = NULL;
    *size = 0;
    size_t cap = 0;
    int rc = 0;
    for (;;) {
        if (*size == cap) {
            size_t grown = cap ? 2 * cap : (size_t)1 << 20;
            unsigned char *p = realloc(*data, grown);
            if (!p) { rc = error_set(ERROR_OUT_OF_MEMORY, "token file %s: out of memory (host)", path); break; }
            *data = p;
            cap = grown;
        }
        size_t got = fread(*data + *size, 1, cap - *size, fp);
        *size += got;
        if (got == 0) {
            if (ferror(fp)) rc = error_set(ERROR_IO, "token file %s: read error", path);
            break;
        }
    }
    fclose(fp);
    if (rc != 0) free(*data);
    return rc;
}

int token_file_open(TokenFile *f, const char *path, int vocab, int seq_len)
{
    *f = (TokenFile){0};
    unsigned char *data = NULL;
    size_t size = 0;
    TRY(read_all(path, &data, &size));
    size_t start = 0, count;
    int32_t first = 0;
    if (size >= sizeof first) memcpy(&first, data, sizeof first);
    if (first == TOKEN_FILE_LLMC_MAGIC) {
        int32_t header[LLMC_HEADER_INTS];
        if (size < sizeof header) {
            free(data);
            return error_set(ERROR_BAD_DATA, "token file %s: llm.c magic but only %zu bytes (a header "
                             "is %zu)", path, size, sizeof header);
        }
        memcpy(header, data, sizeof header);
        start = sizeof header;
        count = (size_t)(header[2] < 0 ? 0 : header[2]);
        if (header[1] != 1 || count * 2 != size - start) {
            free(data);
            return error_set(ERROR_BAD_DATA, "token file %s: llm.c header (version %d, %lld tokens) "
                             "does not match the file (version 1 expected; %zu bytes of tokens)", path,
                             header[1], (long long)header[2], size - start);
        }
        f->format = "llm.c";
    } else {
        if (size % 2 != 0) {
            free(data);
            return error_set(ERROR_BAD_DATA, "token file %s: %zu bytes, not a whole number of uint16 "
                             "tokens (truncated?)", path, size);
        }
        count = size / 2;
        f->format = "raw uint16";
    }
    f->tokens = malloc((count ? count : 1) * sizeof *f->tokens);
    if (!f->tokens) {
        free(data);
        return error_set(ERROR_OUT_OF_MEMORY, "token file %s: out of memory (host)", path);
    }
    for (size_t i = 0; i < count; i++) {  // little-endian whatever this machine is
        f->tokens[i] = (uint16_t)(data[start + 2 * i] | data[start + 2 * i + 1] << 8);
        if (f->tokens[i] > f->max_token) f->max_token = f->tokens[i];
    }
    free(data);
    f->count = count;
    f->train_end = count - (size_t)((double)count * TOKEN_FILE_HOLDOUT);
    if (f->max_token >= vocab) {
        int max = f->max_token;
        token_file_close(f);
        return error_set(ERROR_BAD_DATA, "token file %s: token %d is outside the model's vocabulary "
                         "of %d (give --classes %d or more)", path, max, vocab, max + 1);
    }
    size_t window = (size_t)seq_len + 1;
    if (f->train_end < window || count - f->train_end < window) {
        token_file_close(f);
        return error_set(ERROR_BAD_DATA, "token file %s: %zu tokens; training (90%%) and held-out "
                         "(10%%) parts need a window of %zu tokens each", path, count, window);
    }
    return 0;
}

void token_file_batch(const TokenFile *f, uint64_t seed, uint64_t index, int n, int seq_len,
                      int held_out, int32_t *tokens, int32_t *labels)
{
    size_t lo = held_out ? f->train_end : 0, hi = held_out ? f->count : f->train_end;
    size_t starts = hi - lo - (size_t)seq_len;  // windows [s, s + seq_len] inside [lo, hi)
    Rng r = rng_make(seed, index, held_out ? 0x4E1D : 0x7A1);
    for (int b = 0; b < n; b++) {
        size_t s = lo + (size_t)rng_below(&r, (int64_t)starts);
        for (int i = 0; i < seq_len; i++) {
            tokens[(size_t)b * seq_len + i] = f->tokens[s + i];
            labels[(size_t)b * seq_len + i] = f->tokens[s + i + 1];
        }
    }
}

void token_file_close(TokenFile *f)
{
    free(f->tokens);
    *f = (TokenFile){0};
}
