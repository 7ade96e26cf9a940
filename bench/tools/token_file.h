// token_file.h: a user's token file for `train --preset gpt-* --tokens FILE`
// (bench/tools/token_file.c). Two formats, told apart by the first 4 bytes:
//   - llm.c's: a header of 256 int32 (magic 20240520, version 1, token count, zeros), then
//     the tokens as little-endian uint16;
//   - nanoGPT's prepare.py train.bin: the tokens as little-endian uint16, nothing else.
// Training windows (seq_len + 1 tokens: the tokens and their next ones) start at positions
// drawn from the first 90% of the file, deterministic in (seed, batch index); held-out
// windows come from the last 10%, which training never reads.
#ifndef TOKEN_FILE_H
#define TOKEN_FILE_H

#include <stddef.h>
#include <stdint.h>

#define TOKEN_FILE_LLMC_MAGIC 20240520
#define TOKEN_FILE_HOLDOUT 0.1  // fraction of the file held out, at its end

typedef struct TokenFile {
    uint16_t *tokens;
    size_t count;          // tokens in the file
    size_t train_end;      // tokens [0, train_end) are for training, the rest held out
    int max_token;         // the largest token in the file
    const char *format;    // "llm.c" or "raw uint16"
} TokenFile;

// Reads path; every token must be < vocab and each part must hold a window of seq_len + 1
// tokens. 0, or -1 with the error set (I/O: cannot read; bad data: a truncated or
// inconsistent file, a token outside the vocabulary, too short for one window).
int token_file_open(TokenFile *f, const char *path, int vocab, int seq_len);
// n windows into tokens and labels (n x seq_len each), training (held_out false) or held-out.
void token_file_batch(const TokenFile *f, uint64_t seed, uint64_t index, int n, int seq_len,
                      int held_out, int32_t *tokens, int32_t *labels);
void token_file_close(TokenFile *f);

#endif
