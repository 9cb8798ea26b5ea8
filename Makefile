# TopSpin build. `make` builds bin/; `make test`; `make deps`; `make demo`.
PREFIX ?= /usr/local
CC ?= cc
STATIC ?= 0
GPU ?= auto
OPENBLAS_DIR ?= /usr/lib/x86_64-linux-gnu/openblas-openmp
OPENBLAS_INC ?= /usr/include/x86_64-linux-gnu/openblas-openmp

VERSION := 0.1.0
DEPS := libmsgpack-dev libpcre2-dev libutf8proc-dev libjansson-dev libncurses-dev \
        libopenblas-openmp-dev libopenmpi-dev openmpi-bin nettle-dev pkg-config tmux jq zsh

CFLAGS ?= -O2 -g
CFLAGS += -std=c11 -D_GNU_SOURCE -Wall -Wextra -fno-math-errno -fopenmp -Ilib -I$(OPENBLAS_INC) \
          -DTS_VERSION='"$(VERSION)"'
LIBNAMES := -lmsgpackc -lpcre2-8 -lutf8proc -ljansson -lnettle -lncursesw -ltinfo
ifeq ($(STATIC),1)
LDLIBS := -Wl,-Bstatic $(LIBNAMES) $(OPENBLAS_DIR)/libopenblas.a -lgfortran -lquadmath \
          -Wl,-Bdynamic -fopenmp -lm -lpthread
else
LDLIBS := $(LIBNAMES) -L$(OPENBLAS_DIR) -Wl,-rpath,$(OPENBLAS_DIR) -lopenblas -fopenmp -lm -lpthread
endif

ifeq ($(GPU),auto)
GPU := $(if $(shell command -v nvcc 2>/dev/null),1,0)
endif
CU_SRC := $(wildcard kernels/*.cu)
ifeq ($(GPU),1)
ifneq ($(CU_SRC),)
NVCC ?= nvcc
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(shell command -v $(NVCC)))
CFLAGS += -DTS_GPU=1 -I$(CUDA_HOME)/include
LDLIBS += -L$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lnccl -lcudart
endif
endif

LIB_SRC := $(wildcard lib/*.c)
LIB_OBJ := $(LIB_SRC:%.c=build/%.o) $(if $(filter -DTS_GPU=1,$(CFLAGS)),$(CU_SRC:%.cu=build/%.o))
CMDS := $(patsubst cmd/%.c,bin/%,$(wildcard cmd/*.c))
UNIT := $(patsubst tests/unit/%.c,build/tests/%,$(wildcard tests/unit/*.c))

all: $(CMDS) completions

build/%.o: %.c $(wildcard lib/*.h) | build/lib build/cmd
	$(CC) $(CFLAGS) -c -o $@ $<

build/kernels/%.o: kernels/%.cu $(wildcard lib/*.h kernels/*.h)
	@mkdir -p build/kernels
	$(NVCC) -O3 -arch=sm_90 -Ilib -c -o $@ $<

build/libtopspin.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

bin/%: build/cmd/%.o build/libtopspin.a | bin
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

build/tests/%: tests/unit/%.c $(wildcard tests/unit/*.h) build/libtopspin.a | build/tests
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< build/libtopspin.a $(LDLIBS)

build/lib build/cmd build/tests bin:
	mkdir -p $@

# Completions are generated from each command's option table, so they cannot drift.
completions: $(CMDS) tests/gen-completions
	@tests/gen-completions bin completions

test: all $(UNIT)
	@tests/run

demo: deps
	@$(MAKE) --no-print-directory all
	@examples/demo

deps:
	@missing=$$(for p in $(DEPS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

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
	rm -rf build bin

.PHONY: all test demo deps install clean completions
.SECONDARY:
