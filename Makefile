# TopSpin build. `make` builds bin/; `make test`; `make deps`; `make demo`.
PREFIX ?= /usr/local
CC ?= cc
STATIC ?= 0
GPU ?= auto
OPENBLAS_DIR ?= /usr/lib/x86_64-linux-gnu/openblas-openmp
OPENBLAS_INC ?= /usr/include/x86_64-linux-gnu/openblas-openmp

VERSION := 0.1.0
# Debian packages: what builds and runs the commands (make deps, make demo), and
# what the tests add (make test-deps, make test), all without recommendations.
DEPS := gcc libc6-dev pkg-config libmsgpack-dev libpcre2-dev libutf8proc-dev libjansson-dev \
        libncurses-dev libopenblas-openmp-dev libopenmpi-dev nettle-dev libxxhash-dev libdnnl-dev
TEST_DEPS := openmpi-bin procps tmux jq xxhash zsh groff-base time iproute2 openssh-server xz-utils strace \
        python3-venv python3-torch ca-certificates clang libclang-rt-14-dev

CFLAGS ?= -O2 -g
# Every warning in the project's own sources is an error (make WERROR= for none);
# the libraries' headers come in as system headers, whose warnings are theirs.
# Option tables give ranges (struct opt's last fields) to numeric options only.
WERROR ?= -Werror
WARN := -Wall -Wextra -Wno-missing-field-initializers $(WERROR)
CFLAGS += -std=c11 -D_GNU_SOURCE $(WARN) -fno-math-errno -fopenmp -Ilib -isystem $(OPENBLAS_INC) \
          -DTS_VERSION='"$(VERSION)"'
# Every command is linked against the libraries any command uses; --as-needed (not
# every compiler's default, nor gcc's with -fsanitize) keeps only those it calls.
LIBNAMES := -lmsgpackc -lpcre2-8 -lutf8proc -ljansson -lnettle -lxxhash -lncursesw -ltinfo
ifeq ($(STATIC),1)
# libgomp.a too, so that only the C library is left to the system; the libgomp
# that -fopenmp names after it is then not needed.
LDLIBS := -Wl,--as-needed -Wl,-Bstatic $(LIBNAMES) $(OPENBLAS_DIR)/libopenblas.a -lgfortran -lquadmath \
          -lgomp -Wl,-Bdynamic -fopenmp -lm -lpthread
else
LDLIBS := -Wl,--as-needed $(LIBNAMES) -L$(OPENBLAS_DIR) -Wl,-rpath,$(OPENBLAS_DIR) -lopenblas -fopenmp \
          -lm -lpthread
endif

# oneDNN runs the CPU's bf16 GEMMs (--precision bf16); a STATIC=1 build leaves
# it out (Debian has no static libdnnl), and bf16 with it.
ifneq ($(STATIC),1)
CFLAGS += -DTS_DNNL=1
LDLIBS += -ldnnl
endif

# The shared libxxhash hashes checkpoints on AVX2 or AVX-512 where the CPU has
# them; Debian's static one lacks that dispatch, and a STATIC=1 build does without.
ifneq ($(STATIC),1)
CFLAGS += -DTS_XXH_DISPATCH=1
endif

# MPI (OpenMPI) joins the processes of a distributed run; a STATIC=1 build, made
# to run where no -dev packages are, leaves it out (Debian has no static libmpi).
ifneq ($(STATIC),1)
MPI_CFLAGS := $(shell pkg-config --cflags ompi-c 2>/dev/null)
ifneq ($(MPI_CFLAGS),)
CFLAGS += -DTS_MPI=1 $(patsubst -I%,-isystem %,$(MPI_CFLAGS))
LDLIBS += $(shell pkg-config --libs ompi-c)
endif
endif

ifeq ($(GPU),auto)
GPU := $(if $(shell command -v nvcc 2>/dev/null),1,0)
endif
# the CUDA backend's host C++ and the pip that fetches cudnn-frontend's headers
ifeq ($(GPU),1)
DEPS += g++ python3-venv ca-certificates
endif
CU_SRC := $(wildcard kernels/*.cu) $(wildcard kernels/*.cpp)
FRONTEND_DIR := build/cudnn-frontend
ifeq ($(GPU),1)
ifneq ($(CU_SRC),)
NVCC ?= nvcc
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(shell command -v $(NVCC)))
# T4 (sm_75: fp32 and fp16), A100 (sm_80) and H100/H200 (sm_90); every warning is
# an error. CUDA 13 no longer targets the V100's sm_70: a V100 needs a CUDA 12 toolkit
# and sm_70 added here.
NVFLAGS := -O3 -std=c++17 -gencode arch=compute_75,code=sm_75 -gencode arch=compute_80,code=sm_80 \
           -gencode arch=compute_90,code=sm_90 \
           -Werror all-warnings -Xcompiler -Wall,-Wextra -Ilib -Ikernels
CFLAGS += -DTS_GPU=1 -Ikernels -isystem $(CUDA_HOME)/include
ifeq ($(STATIC),1)
# the CUDA runtime and the C++ runtime inside; cuBLAS (loaded when the GPU
# backend opens, as cuDNN and NCCL are) and the driver come from the GPU
# machine, found where its loader looks (tests/gpu/run finds them for the
# bundle): no path of this machine goes inside
LDLIBS += -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -Wl,-Bstatic -lstdc++ -Wl,-Bdynamic
else
LDLIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -ldl -lstdc++
endif
endif
endif

# SAN=1 builds with AddressSanitizer and UBSan into build-san/ and bin-san/, so that
# sanitized objects never mix with normal ones; `make test SAN=1` tests those commands.
SAN ?= 0
ifeq ($(SAN),1)
B := build-san
BINDIR := bin-san
# float-cast-overflow is not in GCC's "undefined": it catches a NaN or an out-of-range
# float converted to an integer. CC=clang works too and checks a little more (arithmetic
# on a null pointer).
CFLAGS += -fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer \
          -fno-sanitize-recover=undefined,float-cast-overflow
else
B := build
BINDIR := bin
endif

LIB_SRC := $(wildcard lib/*/*.c)
LIB_H := $(wildcard lib/*/*.h)
LIB_OBJ := $(LIB_SRC:%.c=$(B)/%.o) $(if $(filter -DTS_GPU=1,$(CFLAGS)),$(patsubst %.cpp,$(B)/%.o,$(CU_SRC:%.cu=$(B)/%.o)))
CMDS := $(patsubst cmd/%.c,$(BINDIR)/%,$(wildcard cmd/*.c))
UNIT := $(patsubst tests/unit/%.c,$(B)/tests/%,$(wildcard tests/unit/*.c))
# built by make test too, so that they cannot rot between benchmark runs
BENCH := $(patsubst tests/bench/%.c,$(B)/bench/%,$(wildcard tests/bench/*.c))

all: $(CMDS) completions
commands: $(CMDS)

$(B)/%.o: %.c $(LIB_H) | $(B)/cmd
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

$(B)/kernels/%.o: kernels/%.cu $(LIB_H) $(wildcard kernels/*.h)
	@mkdir -p $(B)/kernels
	$(NVCC) $(NVFLAGS) -c -o $@ $<

# host C++ beside the kernels (cuda_sdpa.cpp, over cudnn-frontend): the C++ compiler alone,
# every warning an error but in the frontend's own headers, whose paths (which the
# compiler may make absolute) name no folder of this machine in the binary
$(B)/kernels/%.o: kernels/%.cpp $(LIB_H) $(wildcard kernels/*.h) $(FRONTEND_DIR)/include/cudnn_frontend.h
	@mkdir -p $(B)/kernels
	$(CXX) -O2 -std=c++17 -Wall -Wextra -Werror -Ilib -Ikernels -I$(CUDA_HOME)/include \
	  -isystem $(FRONTEND_DIR)/include -ffile-prefix-map=$(CURDIR)/= -c -o $@ $<

# cudnn-frontend's headers for cuda_sdpa.cpp, from its PyPI wheel (pinned by hash in
# kernels/requirements.txt), fetched once into build/ by a throwaway venv's pip
$(FRONTEND_DIR)/include/cudnn_frontend.h: kernels/requirements.txt
	rm -rf $(FRONTEND_DIR) && mkdir -p $(FRONTEND_DIR)
	/usr/bin/python3 -m venv $(FRONTEND_DIR)/venv
	$(FRONTEND_DIR)/venv/bin/pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
	  --python-version 3.11 --platform manylinux_2_28_x86_64 --require-hashes -r $< -d $(FRONTEND_DIR)/wheel
	/usr/bin/python3 -c 'import sys, glob, zipfile; z = zipfile.ZipFile(glob.glob(sys.argv[1])[0]); \
	  z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("include/")])' \
	  '$(FRONTEND_DIR)/wheel/*.whl' $(FRONTEND_DIR)
	rm -rf $(FRONTEND_DIR)/venv $(FRONTEND_DIR)/wheel
	@test -f $@ || { echo "$@: not in the wheel" >&2; exit 1; }

$(B)/libtopspin.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BINDIR)/%: $(B)/cmd/%.o $(B)/libtopspin.a | $(BINDIR)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(B)/tests/%: tests/unit/%.c $(wildcard tests/unit/*.h) $(B)/libtopspin.a | $(B)/tests
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(B)/libtopspin.a $(LDLIBS)

# benchmark drivers (tests/bench/*.c), linked as the commands are
$(B)/bench/%: tests/bench/%.c $(B)/libtopspin.a
	@mkdir -p $(B)/bench
	$(CC) $(CFLAGS) -o $@ $< $(B)/libtopspin.a $(LDLIBS)

$(B)/cmd $(B)/tests $(BINDIR):
	mkdir -p $@

# Completions are generated from each command's option table, so they cannot drift.
completions: $(CMDS) completions/generate
	@completions/generate $(BINDIR) completions

# The reference the parity tests compare against, made once: a venv over Debian's
# python3 and python3-torch 1.13 (PyPI's torch brings gigabytes of CUDA libraries)
# with the PyPI packages pinned in tests/requirements.txt. `make demo` never makes it.
VENV := build/venv
$(VENV)/ready: tests/requirements.txt
	@echo "making $(VENV): Debian's torch and the PyPI packages of $<"
	rm -rf $(VENV)
	/usr/bin/python3 -m venv --system-site-packages $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check --no-deps -r $<
	@$(VENV)/bin/python -c 'import torch, transformers, tokenizers, safetensors, tensorboard.backend.event_processing.event_accumulator' || \
	  { echo "$(VENV): cannot import the references; make deps installs python3-torch"; exit 1; }
	touch $@

# The speed peers of the CPU benchmarks (tests/bench/requirements.txt): PyPI's
# torch 2 and transformers' Trainer, in a venv of their own; only the
# benchmarks make it.
BENCH_VENV := build/venv-bench
$(BENCH_VENV)/ready: tests/bench/requirements.txt
	@echo "making $(BENCH_VENV): the PyPI packages of $< (about 6 GB)"
	rm -rf $(BENCH_VENV)
	/usr/bin/python3 -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install -q --disable-pip-version-check -r $<
	touch $@

# Under SAN=1 a sanitizer report from any process a test runs fails that test:
# ASan's go to files in $(B)/san-log that tests/run looks at (see there for UBSan's),
# and both exit 99, which no test takes for success or an expected failure. Leak
# checking is off: die() exits from deep inside a command without freeing what it
# holds, by design, and every such exit would count as a leak.
SAN_LOG := $(CURDIR)/$(B)/san-log
SAN_ENV := TS_SAN_LOG=$(SAN_LOG) \
           ASAN_OPTIONS=detect_leaks=0:exitcode=99:log_path=$(SAN_LOG)/asan \
           UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=99
test: test-deps all $(UNIT) $(BENCH) $(VENV)/ready
	@TS_BIN=$(CURDIR)/$(BINDIR) TS_BUILD=$(B) $(if $(filter 1,$(SAN)),$(SAN_ENV)) tests/run

# The GPU check for a machine with a driver but no compilers (tests/gpu/README.md):
# static binaries with the CUDA backend, built apart in build-bundle/, and what
# tests/gpu/run needs beside them, in one relocatable tarball.
BUNDLE := build/topspin-$(VERSION)-gpu.tar.xz
bundle: $(BUNDLE)
$(BUNDLE): $(CU_SRC) $(LIB_SRC) $(LIB_H) $(wildcard cmd/*.c kernels/*.h tests/unit/* tests/gpu/* tests/cli/*.sh examples/*) \
           tests/lib.sh tests/bench/train_gpu tests/bench/hf_bert_gpu.py
	@$(MAKE) --no-print-directory GPU=1 STATIC=1 SAN=0 B=build-bundle BINDIR=build-bundle/bin commands \
	  $(patsubst tests/unit/%.c,build-bundle/tests/%,$(wildcard tests/unit/test_cuda_*.c))
	tests/gpu/pack build-bundle $@

demo: deps
	@$(MAKE) --no-print-directory all
	@examples/demo

# apt_install WHAT PACKAGES: installs those of PACKAGES that are missing (as root), with
# one line that says what, how much and where apt-get's whole log is (build/apt.log)
define apt_install
	@missing=$$(for p in $(2); do dpkg -s $$p 2>/dev/null | grep -q '^Status: .* installed$$' || echo $$p; done); \
	[ -z "$$missing" ] && exit 0; missing=$$(echo $$missing); \
	if [ "$$(id -u)" != 0 ]; then \
	  echo "make: $(1) needs these Debian packages: $$missing; run 'sudo make $@' once" >&2; exit 1; fi; \
	mkdir -p build; log=$(CURDIR)/build/apt.log; \
	install="apt-get install -y --no-install-recommends -o Dpkg::Use-Pty=0 $$missing"; \
	{ apt-get update && DEBIAN_FRONTEND=noninteractive $$install --assume-no; } >$$log 2>&1; \
	grep -q 'newly installed' $$log || \
	  { tail -n 5 $$log >&2; echo "make: apt-get cannot install $$missing (its whole log: $$log)" >&2; exit 1; }; \
	echo "installing $(1): $$missing and what they need, $$(grep -o '[0-9]* newly installed' $$log | cut -d' ' -f1)" \
	  "packages, $$(grep -o '[0-9.,]* [kMG]B of additional' $$log | cut -d' ' -f1,2) of disk (apt-get's log: $$log)"; \
	DEBIAN_FRONTEND=noninteractive $$install >>$$log 2>&1 || \
	  { tail -n 5 $$log >&2; echo "make: apt-get failed (its whole log: $$log)" >&2; exit 1; }
endef

deps:
	$(call apt_install,what the build needs,$(DEPS))

test-deps: deps
	$(call apt_install,what the tests need,$(TEST_DEPS))

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man7 \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions
	install -m 755 $(CMDS) $(DESTDIR)$(PREFIX)/bin
	install -m 644 man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 644 man/*.7 $(DESTDIR)$(PREFIX)/share/man/man7
	for c in $(notdir $(CMDS)); do \
	  install -m 644 completions/$$c.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/$$c; \
	  install -m 644 completions/_$$c $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_$$c; done

clean:
	rm -rf build bin build-san bin-san build-bundle

.PHONY: all commands bundle test demo deps test-deps install clean completions fuzz fuzz-smoke
.SECONDARY:

# Fuzz targets (tests/fuzz/): clang's libFuzzer with ASan and UBSan, over a
# copy of lib/ built the same way in build/fuzz/lib, apart from the gcc build.
FUZZ_CC ?= clang
FUZZ_SECS ?= 60
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -fopenmp $(WARN) -Wno-pass-failed -Ilib \
               -isystem $(OPENBLAS_INC) \
               -DTS_VERSION='"$(VERSION)"' $(FUZZ_SAN)
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS := $(FUZZ_NAMES:%=build/fuzz/fuzz_%)
FUZZ_LIB_OBJ := $(LIB_SRC:lib/%.c=build/fuzz/lib/%.o)

build/fuzz/lib/%.o: lib/%.c $(LIB_H)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

build/fuzz/libtopspin.a: $(FUZZ_LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(wildcard tests/fuzz/*.h) build/fuzz/libtopspin.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -DFUZZ_VOCAB='"$(CURDIR)/examples/vocab.txt"' \
	  -o $@ $< build/fuzz/libtopspin.a $(LIBNAMES) -lm

fuzz: $(FUZZ_BINS)

# Each target on the inputs that once crashed it (tests/fuzz/regress/), then
# on its corpus for FUZZ_SECS seconds; any crash fails. New inputs go to
# build/fuzz/new/, leaving the committed corpus as it is. -close_fd_mask=2
# hides die()'s messages, not the sanitizers' reports.
fuzz-smoke: fuzz
	@for n in $(FUZZ_NAMES); do \
	  log=build/fuzz/$$n.log; mkdir -p build/fuzz/new/$$n; \
	  if [ -d tests/fuzz/regress/$$n ]; then \
	    build/fuzz/fuzz_$$n -close_fd_mask=2 tests/fuzz/regress/$$n/* >$$log 2>&1 || \
	    { tail -40 $$log; echo "fuzz_$$n: a regression input crashes it"; exit 1; }; fi; \
	  build/fuzz/fuzz_$$n -max_total_time=$(FUZZ_SECS) -timeout=10 -close_fd_mask=2 \
	    -artifact_prefix=build/fuzz/$$n- build/fuzz/new/$$n tests/fuzz/corpus/$$n/ >$$log 2>&1 || \
	    { tail -40 $$log; echo "fuzz_$$n: crashed; the input is in build/fuzz/$$n-*"; exit 1; }; \
	  echo "fuzz_$$n: $$(grep -o 'cov: [0-9]* ft: [0-9]*' $$log | tail -1), $(FUZZ_SECS) s, no crash"; \
	done
