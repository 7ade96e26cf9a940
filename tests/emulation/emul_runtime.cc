#include "cuda_emul.h"
namespace emul {
thread_local uint3 threadIdx_, blockIdx_;
dim3 blockDim_, gridDim_;
pthread_barrier_t block_bar;
pthread_barrier_t warp_bar[32];
float slots_f[32][32];
int slots_i[32][32];
std::vector<char> dyn_smem;
std::mutex atomic_mu;
}
