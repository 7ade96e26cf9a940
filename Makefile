# Tuning-practice benchmark suite: top-level build.
# build/ (or $(BUILD)) is the only output folder. Layout conventions, so a new
# file needs no Makefile edit, and a new practice is a new folder bench/<practice>/:
#   <module>/*.c|*.cu|*.cc     -> build/lib<module>.a (module = kernels loaders dist tests
#                                 bench/driver; every program links them all; kernels/*/ too)
#   bench/<practice>/bench_*.c -> build/bench_*       (the practice's program)
#   bench/<practice>/ the rest -> build/libbench_<practice>.a (its program's own library;
#                                 the tests link every practice's)
#   <module>/*_main.c, bench/tools/*_main.c -> build/<name> (e.g. bench/tools/train_main.c -> build/train)
#   bench/tools/ the rest      -> build/libbench_tools.a  (the tools' own helpers, e.g. train_options.c;
#                                 a program links its own folder's library)
#   tests/test_*.c             -> build/tests/test_*  (cmocka tests, run by `make test`;
#                                 tests/*.c other than test_*.c -> build/libtests.a)
# A library is named after its folder, / becoming _: bench/driver -> build/libbench_driver.a.

BUILD      ?= build
CUDA_HOME  ?= /usr/local/cuda
CUDNN_HOME ?=
NCCL_HOME  ?=
NVCC       := $(CUDA_HOME)/bin/nvcc

# Goals that run scripts on results folders, never the compiler: they need no CUDA toolkit.
NO_NVCC_GOALS := compare charts guide clean
ifneq ($(filter-out $(NO_NVCC_GOALS),$(or $(MAKECMDGOALS),all)),)
ifeq ($(wildcard $(NVCC)),)
$(error nvcc not found at $(NVCC): install the CUDA toolkit or set CUDA_HOME=/path/to/cuda)
endif
endif

# GPU architectures: CUDA_ARCH=... overrides; else the visible GPU; else a portable set
# (Ampere, Ada, Hopper incl. H100/H200, Blackwell) with PTX for newer GPUs.
LOCAL_ARCH := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d '. ')
ifneq ($(CUDA_ARCH),)
  ARCH_REASON := from CUDA_ARCH
else ifneq ($(LOCAL_ARCH),)
  CUDA_ARCH   := $(LOCAL_ARCH)
  ARCH_REASON := the visible GPU
else
  CUDA_ARCH   := 80 86 89 90 100 120
  ARCH_REASON := portable default, no GPU visible
endif
PTX_ARCH   := $(shell echo $(CUDA_ARCH) | tr " " "\n" | sort -n | tail -n 1)
GENCODE    := $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
              -gencode arch=compute_$(PTX_ARCH),code=compute_$(PTX_ARCH)
ifeq ($(MAKELEVEL),0)
ifeq ($(filter clean deps test-sanitize,$(MAKECMDGOALS)),)
$(info CUDA architectures: $(addprefix sm_,$(CUDA_ARCH)) + PTX compute_$(PTX_ARCH) ($(ARCH_REASON)))
endif
endif

comma    := ,
INCLUDES := -I. -I$(CUDA_HOME)/include $(if $(CUDNN_HOME),-I$(CUDNN_HOME)/include) $(if $(NCCL_HOME),-I$(NCCL_HOME)/include)
LIBDIRS  := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 \
            $(if $(CUDNN_HOME),-L$(CUDNN_HOME)/lib -L$(CUDNN_HOME)/lib64 -Wl$(comma)-rpath$(comma)$(CUDNN_HOME)/lib) \
            $(if $(NCCL_HOME),-L$(NCCL_HOME)/lib -Wl$(comma)-rpath$(comma)$(NCCL_HOME)/lib)

CC       := gcc
CXX      := g++
CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -MMD -MP $(INCLUDES)
CXXFLAGS ?= -O2 -g
CXXFLAGS += -std=c++17 -Wall -Wextra -Werror -MMD -MP $(INCLUDES)
NVFLAGS  ?= -O2 -g -lineinfo
NVFLAGS  += -std=c++17 $(GENCODE) -Werror all-warnings -Xcompiler -Wall,-Wextra -MMD -MP $(INCLUDES)
# SANITIZE=1 (what `make test-sanitize` passes to its own build): AddressSanitizer (with
# LeakSanitizer) and UBSan on all C, C++ and nvcc host code; a UBSan report aborts, it is
# never just printed. Device code is compiled as usual. Run-time options: scripts/run-tests.sh.
SANITIZE_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
ifeq ($(SANITIZE),1)
  CFLAGS   += $(SANITIZE_FLAGS)
  CXXFLAGS += $(SANITIZE_FLAGS)
  NVFLAGS  += -Xcompiler -fsanitize=address -Xcompiler -fsanitize=undefined \
              -Xcompiler -fno-sanitize-recover=undefined -Xcompiler -fno-omit-frame-pointer
  LINK_SANITIZE := $(SANITIZE_FLAGS)
endif
LDLIBS   := $(LIBDIRS) -lcudart -lcublas -lcudnn -lnccl -lbenchmark -lturbojpeg -ljpeg -lcmocka \
            -lopenblas -lpthread -lm -ldl -lrt

MODULES   := kernels loaders dist tests bench/driver
PRACTICES := $(filter-out bench/driver bench/tools,$(patsubst %/,%,$(wildcard bench/*/)))
# Open MPI (dist/'s CPU collectives and mpirun/srun launch): only dist/ compiles against
# it and only the programs that use dist/ link it (nothing else needs libmpi).
# Recursive (=), so they are asked for when used: after `make deps` has installed mpicc.
MPI_CFLAGS = $(shell mpicc --showme:compile 2>/dev/null)
MPI_LDLIBS = $(shell mpicc --showme:link 2>/dev/null)
MPI_PROGS   = $(BUILD)/bench_ddp $(BUILD)/train
# A folder's library: its sources other than programs (bench_*.c, *_main.c) and tests.
# A module in NESTED_MODULES takes its subfolders' sources too: kernels/ is one library
# (its public headers at the top, one folder per backend and for the core, the model and
# the platform code; docs/source-layout.md).
NESTED_MODULES := kernels
src_dirs  = $(1) $(if $(filter $(NESTED_MODULES),$(1)),$(patsubst %/,%,$(wildcard $(1)/*/)))
lib_srcs  = $(filter-out $(1)/bench_%.c $(1)/test_%.c %_main.c,$(foreach d,$(call src_dirs,$(1)),$(wildcard $(d)/*.c $(d)/*.cu $(d)/*.cc)))
lib_objs  = $(patsubst %,$(BUILD)/%.o,$(call lib_srcs,$(1)))
lib_of    = $(if $(call lib_srcs,$(1)),$(BUILD)/lib$(subst /,_,$(1)).a)
LIBS          := $(foreach m,$(MODULES),$(call lib_of,$(m)))
PRACTICE_LIBS := $(foreach p,$(PRACTICES),$(call lib_of,$(p)))

BENCH_SRCS := $(wildcard $(addsuffix /bench_*.c,$(PRACTICES)))
MAIN_SRCS  := $(wildcard $(addsuffix /*_main.c,$(MODULES) bench/tools))
TEST_SRCS  := $(wildcard tests/test_*.c)
BENCHES    := $(foreach s,$(BENCH_SRCS),$(BUILD)/$(basename $(notdir $(s))))
MAINS      := $(foreach s,$(MAIN_SRCS),$(BUILD)/$(patsubst %_main.c,%,$(notdir $(s))))
TESTS      := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRCS))
DEPS_OK    := $(BUILD)/.deps-ok
ifeq ($(SANITIZE),1) # every sanitized program records its reports for run-tests.sh (see there)
$(BENCHES) $(MAINS) $(TESTS): $(BUILD)/tests/sanitizer/report_hook.c.o
endif

.PHONY: all test test-sanitize bench bench-quick charts compare guide clean deps
.SECONDARY:
.DEFAULT_GOAL := all

all: $(BENCHES) $(MAINS) $(TESTS)

# Debian packages the suite needs (Google Benchmark, cmocka, TurboJPEG, gnuplot, Open MPI).
deps: $(DEPS_OK)
$(DEPS_OK): scripts/setup.sh
	@bash scripts/setup.sh
	@mkdir -p $(@D) && touch $@

$(BUILD)/%.c.o: %.c | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@
$(BUILD)/%.cc.o: %.cc | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -c $< -o $@
$(BUILD)/%.cu.o: %.cu | $(DEPS_OK)
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -c $< -o $@

# The fast CPU layers: vectorised (-O3, OpenMP simd pragmas; SIMD clones chosen at run time).
CPU_FAST_OBJS := $(patsubst %,$(BUILD)/%.o,$(wildcard kernels/cpu/*cpu_fast*.c))
$(CPU_FAST_OBJS): CFLAGS += -O3 -fopenmp-simd

define module_lib
$(call lib_of,$(1)): $(call lib_objs,$(1))
	@rm -f $$@
	ar rcs $$@ $$^
endef
$(foreach m,$(MODULES) $(PRACTICES) bench/tools,$(if $(call lib_srcs,$(m)),$(eval $(call module_lib,$(m)))))

# EXTRA_RPATH: more run-path folders, e.g. '$$ORIGIN/../device-stage/lib' for the GPU
# check's staged build (scripts/device-stage.sh), so its programs find the staged libraries.
RPATHS := $(foreach d,$(EXTRA_RPATH),-Wl,-rpath,'$(d)')
LINK = $(CXX) $(LINK_SANITIZE) $(filter %.o,$^) -Wl,--start-group $(filter %.a,$^) -Wl,--end-group $(LDLIBS) $(RPATHS) -o $@

$(BUILD)/dist/%.c.o: CFLAGS += $(MPI_CFLAGS)
$(MPI_PROGS): LDLIBS += $(MPI_LDLIBS)
$(BUILD)/tests/test_dist%: LDLIBS += $(MPI_LDLIBS)
define bench_prog
$(BUILD)/$(basename $(notdir $(1))): $(BUILD)/$(1).o $(call lib_of,$(patsubst %/,%,$(dir $(1)))) $(LIBS)
	$$(LINK)
endef
$(foreach s,$(BENCH_SRCS),$(eval $(call bench_prog,$(s))))
define main_prog
$(BUILD)/$(patsubst %_main.c,%,$(notdir $(1))): $(BUILD)/$(1).o $(call lib_of,$(patsubst %/,%,$(dir $(1)))) $(LIBS)
	$$(LINK)
endef
$(foreach s,$(MAIN_SRCS),$(eval $(call main_prog,$(s))))
$(BUILD)/tests/test_%: $(BUILD)/tests/test_%.c.o $(LIBS) $(PRACTICE_LIBS)
	$(LINK)

# TEST_JOBS: test programs run at once by `make test` and `make test-sanitize` (see
# scripts/run-tests.sh): the machine's cores without a visible GPU, one at a time with one
# (the GPU tests share it).
TEST_JOBS ?= $(if $(LOCAL_ARCH),1,$(shell nproc 2>/dev/null || echo 1))
export TEST_JOBS

# The runners are exec'd: make's child is then the runner itself, not a shell around it, so
# a signal to make's process group (timeout(1), scancel, Ctrl-C) finds it still handling the
# signal (stopping what it started, writing what finished) and make waits for it, instead
# of a shell that dies at once and a make that returns before the runner is done.
test: all
	@exec bash scripts/run-tests.sh $(BUILD)

# Every test again, built with ASan + UBSan into its own folder (forked loader workers and
# the programs the tests run are sanitized too); reports fail the run. Nothing runs on a
# GPU without one, so without a visible GPU it compiles for one architecture (sm_90).
# The tests of the scripts alone (shell, Python, gnuplot; the programs they run are fakes
# or are run by other tests too) are left out: nothing of theirs is sanitized. So is
# test_bench_allocator: ASan replaces malloc itself, so no allocator the practice preloads
# can be in effect (its check says so and fails, as it should).
SANITIZE_BUILD ?= build-sanitize
SANITIZE_ARCH  := $(if $(filter portable%,$(ARCH_REASON)),90,$(CUDA_ARCH))
SANITIZE_SKIP  := test_charts test_compare test_device_check test_docs_flags test_docs_links test_guide test_report test_run_suite \
                  test_scripts test_setup_torch test_stats test_twin_bench test_twin_compare test_twin_data test_twin_model \
                  test_twin_summary test_verdicts test_bench_allocator
test-sanitize:
	@echo "test-sanitize: ASan + UBSan build in $(SANITIZE_BUILD)/ for $(addprefix sm_,$(SANITIZE_ARCH)); not run: $(SANITIZE_SKIP)"
	@$(MAKE) --no-print-directory BUILD=$(SANITIZE_BUILD) SANITIZE=1 CUDA_ARCH="$(SANITIZE_ARCH)" all
	@TESTS_SKIP="$(SANITIZE_SKIP)" exec bash scripts/run-tests.sh $(SANITIZE_BUILD)

# BENCH_REPETITIONS: the least repetitions of every benchmark (default 6; BENCH_PRECISION adds more);
# BENCH_BUDGET=SECONDS bounds the run (what is cut is kept as partial); BENCH_VERBOSE=1
# prints every program's full console (always in results/<run>/logs/). A signal to make
# (timeout 40 make bench) stops the running program too and keeps what finished (see
# scripts/run-suite.sh; the runner is exec'd, as for make test).
BENCH_REPETITIONS ?= 6
bench: all
	@BENCH_REPETITIONS=$(BENCH_REPETITIONS) exec bash scripts/run-suite.sh $(BUILD)

# The quick pass of every practice (scripts/quick-pass.txt, shared with the GPU check):
# the same outputs, in about 7 min on one GPU by that file's estimates (not yet timed on one).
# Its own repetitions (4) unless BENCH_REPETITIONS is set.
bench-quick: all
	@BENCH_PLAN=scripts/quick-pass.txt BENCH_COMMAND="make bench-quick" exec bash scripts/run-suite.sh $(BUILD)

# RESULTS is a path, data: make neither expands it (a $(shell ...) in a folder name would
# run) nor exports it (exporting expands it); the recipes set its text, single-quoted, as a
# shell variable (newlines spelled "$nl": make ends a command at a raw one), and the
# scripts split it themselves.
unexport RESULTS
define newline


endef
results_sh = nl=$$(printf '\nx'); nl=$${nl%x}; \
  RESULTS='$(subst $(newline),'"$$nl"',$(subst ','\'',$(value RESULTS)))'; export RESULTS

# Several results folders side by side: make compare RESULTS="results/A results/B ..."
# (folders apart by spaces, or by newlines when a name holds a space).
# REF=NAME or REF=N: the reference machine (default the first); data, like RESULTS.
unexport REF
compare:
	@$(results_sh); REF='$(subst ','\'',$(value REF))' bash scripts/compare.sh

# A tuning-guide folder from one or more runs (one per machine): make guide RESULTS="results/A ..."
# [GUIDE_DIR=dir] [GUIDE_PNG=1] (docs/guide.md). Python and gnuplot only: no build, no CUDA.
guide:
	@$(results_sh); bash scripts/guide.sh

# Redraw charts and the report of the newest results folder (or RESULTS=dir).
charts: | $(DEPS_OK)
	@$(results_sh); bash scripts/charts.sh $${RESULTS:+"$$RESULTS"}
	@$(results_sh); bash scripts/report.sh $${RESULTS:+"$$RESULTS"}

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
