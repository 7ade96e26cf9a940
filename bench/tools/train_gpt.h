// train_gpt.h: `train` on a GPT preset (bench/tools/train_gpt.c): the generated Markov token
// task of kernels/synth.h, its loss floor beside the loss.
#ifndef TRAIN_GPT_H
#define TRAIN_GPT_H

#include "bench/tools/train_options.h"
#include "kernels/core.h"

// Trains cfg (a CORE_MODEL_GPT config) for a->steps steps and evaluates a->eval_batches
// held-out batches (-1: 4). Returns the process's exit status: 0, 1 on an error (printed),
// 2 when the held-out next-token accuracy is below a->target_accuracy.
int train_gpt(const CoreConfig *cfg, const TrainArgs *a);

#endif
