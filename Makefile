# pskv build. Objects and binaries go to $(BUILD) (binaries in $(BUILD)/bin).
# `make test` builds a second tree with AddressSanitizer + UndefinedBehaviorSanitizer
# in build/asan and runs the unit and integration tests against it.

BUILD    ?= build
SANITIZE ?=
PREFIX   ?= /usr/local
DESTDIR  ?=
CC       ?= cc

PKGS     := libzmq libprotobuf-c openblas libmicrohttpd liblz4 libzstd
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null)

WARN     := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Werror
OPT      ?= -O2 -g
CFLAGS   ?=
ifneq ($(SANITIZE),)
SANFLAGS := -fsanitize=$(SANITIZE) -fno-sanitize-recover=all -fno-omit-frame-pointer
endif
# Roles share code only through common/: each folder adds its own includes (ROLE_INC below).
ALLCFLAGS = -std=c11 $(OPT) -fPIC -MMD -MP $(WARN) $(SANFLAGS) -Iinclude/pskv -Icommon $(ROLE_INC) -I$(BUILD)/gen \
            $(PKG_CFLAGS) $(CFLAGS)
LDLIBS   = $(PKG_LIBS) -lz -lm -lpthread -ldl
LDFLAGS  += $(SANFLAGS)

GEN_C    := $(BUILD)/gen/pskv.pb-c.c
GEN_H    := $(BUILD)/gen/pskv.pb-c.h
COMMON   := $(wildcard common/*.c)
COMMON_O := $(COMMON:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/pskv.pb-c.o
# common/update/: the updaters, linked by the server and by pskv-worker's all-reduce
# mode (not by libpskv).
UPDATE_O := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard common/update/*.c))
# include/pskv/: the installed contract (pskv.h, pskv_errors.h, pskv_updater.h).
# worker/lib/: libpskv; worker/apps/: pskv-worker's main and app table, with the
# training apps in train/ and the check and bench apps in check/; worker/data/: data
# readers, model files and the sparse generator.
LIB_SRC  := $(wildcard worker/lib/*.c)
LIB_O    := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(COMMON_O)
# abi1.o: the 1.0 entry points (@PSKV_1), in libpskv.so only
ABI1_O   := $(BUILD)/obj/worker/lib/abi1.o
# scheduler/: pskv-scheduler; scheduler/ctl/: pskvctl and its verbs
SCHED_SRC := $(wildcard scheduler/*.c)
SCHED_O  := $(SCHED_SRC:%.c=$(BUILD)/obj/%.o)
CTL_SRC  := $(wildcard scheduler/ctl/*.c)
CTL_O    := $(CTL_SRC:%.c=$(BUILD)/obj/%.o)
# scheduler/tune/: pskv-tune (search, trial schedulers, the SQLite study); it checks
# its space files against the training and check apps' flag sections
TUNE_SRC := $(wildcard scheduler/tune/*.c)
TUNE_O   := $(TUNE_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/worker/apps/train/train_flags.o \
            $(BUILD)/obj/worker/apps/check/check_flags.o
TUNE_UNIT_O := $(patsubst %,$(BUILD)/obj/scheduler/tune/%.o,gp space suggest tplace tsched)
TUNE_LIBS := $(shell pkg-config --libs sqlite3 2>/dev/null || echo -lsqlite3)
# server/: the process and its message rules; its rooms follow a push's stages:
# repl/ (chains, fill, forwarding, dedupe), consist/ (consistency models),
# store/ (shards, tables, sweeps), persist/ (checkpoints).
SERVER_SRC := $(wildcard server/*.c server/*/*.c)
SERVER_O := $(SERVER_SRC:%.c=$(BUILD)/obj/%.o) $(UPDATE_O)
SERVER_LIB_O := $(filter-out $(BUILD)/obj/server/main.o $(BUILD)/obj/server/serve.o,$(SERVER_O))
DATA_SRC := $(filter-out worker/data/gen_sparse.c,$(wildcard worker/data/*.c))
DATA_O   := $(DATA_SRC:%.c=$(BUILD)/obj/%.o)
APP_SRC  := $(wildcard worker/apps/*.c worker/apps/*/*.c)
APP_O    := $(APP_SRC:%.c=$(BUILD)/obj/%.o)
WORKER_O := $(APP_O) $(DATA_O)
# worker/serve/: pskv-serve, a reader of a model (a file now; a running job's tables
# next) that answers predictions with the training apps' model code
SERVE_SRC := $(wildcard worker/serve/*.c)
SERVE_O  := $(SERVE_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/worker/apps/train/model.o \
            $(BUILD)/obj/worker/apps/train/sparse_eval.o $(DATA_O)
# worker code the unit tests link (readers, models, libpskv's clipping, kkt and request
# planning with wstate's error message; no main)
WORKER_UNIT_O := $(DATA_O) $(BUILD)/obj/worker/apps/train/model.o $(BUILD)/obj/worker/apps/train/pipesched.o \
                 $(BUILD)/obj/worker/apps/train/balsplit.o $(BUILD)/obj/worker/apps/train/lrsched.o \
                 $(BUILD)/obj/worker/apps/train/pipemove.o $(BUILD)/obj/worker/apps/train/eta.o \
                 $(BUILD)/obj/worker/lib/wclip.o $(BUILD)/obj/worker/lib/wkkt.o \
                 $(BUILD)/obj/worker/lib/wplan.o $(BUILD)/obj/worker/lib/wstate.o \
                 $(BUILD)/obj/worker/lib/wpy.o
# pskv-serve's pieces the serve suite links (no main, no HTTP)
SERVE_UNIT_O := $(patsubst %,$(BUILD)/obj/worker/serve/%.o,sjson snap predict smerge) \
                $(BUILD)/obj/worker/apps/train/sparse_eval.o
# scheduler code the membership suite links: the node table, its events, the
# view it publishes and the sends, a group's resume and checkpoints, early stopping
# per group (no main)
SCHED_UNIT_O := $(patsubst %,$(BUILD)/obj/scheduler/%.o,membership group grpresume checkpoint sched_metrics events view holders sched_net detect earlystop)
UNIT_SRC := $(wildcard test/unit/*.c)
UNIT_O   := $(UNIT_SRC:%.c=$(BUILD)/obj/%.o)

BIN      := $(BUILD)/bin
BINS     := $(BIN)/pskv-scheduler $(BIN)/pskv-server $(BIN)/pskv-worker $(BIN)/pskv-evaluator \
            $(BIN)/pskvctl $(BIN)/pskv-serve $(BIN)/pskv-tune
# pskv-evaluator: pskv-worker's main built with -DPSKV_EVALUATOR, on the same apps
EVAL_MAIN_O := $(BUILD)/obj/worker/apps/evaluator_main.o
EVAL_O   := $(filter-out $(BUILD)/obj/worker/apps/worker_main.o,$(APP_O)) $(EVAL_MAIN_O) $(DATA_O)
TOOLS    := $(BIN)/pskv-zmq-rtt $(BIN)/pskv-tcp-floor $(BIN)/pskv-zmq-bidir $(BIN)/pskv-chain-floor $(BIN)/pskv-hashmap-floor $(BIN)/pskv-fault-cost $(BIN)/pskv-grow-bench $(BIN)/pskv-halfvec-bench $(BIN)/pskv-gp-bench $(BIN)/pskv-metrics-cost $(BIN)/pskv-garbage $(BIN)/pskv-fuzz-replay $(BIN)/pskv-gen-sparse \
            $(BIN)/pskv-faultproxy $(BIN)/pskv-wire-pattern $(BIN)/pskv-lr-change $(BIN)/pskv-table-open $(BIN)/pskv-shm-fallback \
            $(BIN)/pskv-abi-1.0 $(BIN)/pskv-abi-client
LIBS     := $(BUILD)/lib/libpskv.a $(BUILD)/lib/libpskv.so

FORCE:
.PHONY: FORCE all tools deps size docs docs-check test unit integration pytest faults test-faults soak bench-faults demo tune-demo bench bench-incr bench-allreduce bench-metrics bench-pushpull bench-curve bench-train bench-consistency bench-balance bench-sparse bench-hosts bench-serve chaos install deb package-check clean fuzz fuzz-live tsan
.DEFAULT_GOAL := all

MANS     := $(BINS:$(BIN)/%=$(BUILD)/man/man1/%.1)
PLUGINS  := $(BUILD)/lib/pskv-plugin-scaled-sgd.so $(BUILD)/lib/pskv-plugin-wrong-abi.so

all: $(BINS) $(LIBS) $(TOOLS) $(PLUGINS) $(BUILD)/pskv.pc $(MANS)

# Manual pages, written by each program from the table that drives its flags and
# --help (`PROGRAM --man`, common/manpage), so the two never disagree.
$(BUILD)/man/man1/%.1: $(BIN)/%
	@mkdir -p $(dir $@)
	$< --man > $@.tmp && mv $@.tmp $@

deps:
	@scripts/install-deps.sh

$(GEN_C) $(GEN_H): proto/pskv.proto
	@mkdir -p $(BUILD)/gen
	protoc-c --c_out=$(BUILD)/gen -Iproto proto/pskv.proto

# Generated code is not ours to lint: no -Werror and no prototype warnings there.
$(BUILD)/obj/gen/pskv.pb-c.o: $(GEN_C)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) -fPIC $(SANFLAGS) $(PKG_CFLAGS) -I$(BUILD)/gen -c $< -o $@

$(BUILD)/obj/server/%.o: ROLE_INC := -Iserver
$(BUILD)/obj/scheduler/%.o: ROLE_INC := -Ischeduler
# pskv-tune checks its space files against the apps' flag sections (apptab.h)
$(BUILD)/obj/scheduler/tune/%.o: ROLE_INC := -Ischeduler -Iworker/apps
$(BUILD)/obj/worker/apps/%.o: ROLE_INC := -Iworker/apps -Iworker/data
$(BUILD)/obj/worker/serve/%.o: ROLE_INC := -Iworker/serve -Iworker/apps -Iworker/data
$(BUILD)/obj/test/unit/%.o: ROLE_INC := -Iserver -Ischeduler -Iworker/lib -Iworker/apps -Iworker/data -Iworker/serve
$(BUILD)/obj/test/bench/grow_bench.o: ROLE_INC := -Iserver
$(BUILD)/obj/test/bench/gp_bench.o: ROLE_INC := -Ischeduler

$(BUILD)/obj/%.o: %.c $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) -c $< -o $@

$(EVAL_MAIN_O): ROLE_INC := -Iworker/apps -Iworker/data
$(EVAL_MAIN_O): worker/apps/worker_main.c $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) -DPSKV_EVALUATOR -c $< -o $@

$(BUILD)/obj/test/unit/%.o: test/unit/%.c $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) $(CHECK_CFLAGS) -c $< -o $@

# libpskv.a has no symbol versions: it leaves out abi1.o, the 1.0 entry points
# (a static link always uses the header it was compiled against).
$(BUILD)/lib/libpskv.a: $(filter-out $(ABI1_O),$(LIB_O))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# The soname stays libpskv.so.1; symbol versions (worker/lib/libpskv.map) keep
# programs linked against older releases working (docs/extending.md "The ABI").
$(BUILD)/lib/libpskv.so: $(LIB_O) worker/lib/libpskv.map
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libpskv.so.1 -Wl,--version-script=worker/lib/libpskv.map \
	  $(LDFLAGS) -o $@ $(LIB_O) $(LDLIBS)

# The example updater plug-in (test/examples/plugin_scaled_sgd.c), and a copy declaring a
# wrong ABI version for the refusal test.
$(BUILD)/lib/pskv-plugin-scaled-sgd.so: test/examples/plugin_scaled_sgd.c include/pskv/pskv_updater.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) -fPIC -shared $(WARN) $(SANFLAGS) -Iinclude/pskv -o $@ $<

$(BUILD)/lib/pskv-plugin-wrong-abi.so: test/examples/plugin_scaled_sgd.c include/pskv/pskv_updater.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) -fPIC -shared $(WARN) $(SANFLAGS) -DPLUGIN_ABI=99 -Iinclude/pskv -o $@ $<

$(BIN)/pskv-scheduler: $(SCHED_O) $(COMMON_O)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/pskv-tune: $(TUNE_O) $(COMMON_O)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(TUNE_LIBS) $(LDLIBS)

$(BIN)/pskvctl: $(CTL_O) $(COMMON_O)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/pskv-serve: $(SERVE_O) $(COMMON_O)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/pskv-server: $(SERVER_O) $(COMMON_O)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# --sync allreduce applies the servers' updaters on the workers (worker/apps/train/train_ar.c)
$(BIN)/pskv-worker: $(WORKER_O) $(UPDATE_O) $(BUILD)/lib/libpskv.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/pskv-evaluator: $(EVAL_O) $(UPDATE_O) $(BUILD)/lib/libpskv.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/pskv-gen-sparse: $(BUILD)/obj/worker/data/gen_sparse.o $(BUILD)/obj/worker/data/auc.o $(COMMON_O)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/pskv-faultproxy: $(BUILD)/obj/test/tools/faultproxy.o $(BUILD)/obj/test/tools/faultproxy_relay.o $(COMMON_O)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# a user's program: links libpskv like any other
$(BIN)/pskv-wire-pattern: $(BUILD)/obj/test/examples/wire_pattern.o $(BUILD)/lib/libpskv.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/pskv-lr-change: $(BUILD)/obj/test/examples/lr_change.o $(BUILD)/lib/libpskv.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/pskv-table-open: $(BUILD)/obj/test/examples/table_open.o $(BUILD)/lib/libpskv.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/pskv-shm-fallback: $(BUILD)/obj/test/examples/shm_fallback.o $(BUILD)/lib/libpskv.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The ABI test's programs (test/abi/, t_abi_1_0): pskv-abi-1.0 is built the way a
# program for libpskv 1.0 was, with the frozen 1.0 header, and linked against a libpskv
# without symbol versions (the same objects linked as before libpskv.map, so its
# references are unversioned; DT_NEEDED libpskv.so.1); pskv-abi-client with today's
# header and libpskv.so. The test runs both against today's libpskv.so.1.
ABI_UNVERSIONED := $(BUILD)/lib/unversioned/libpskv.so
$(ABI_UNVERSIONED): $(filter-out $(ABI1_O),$(LIB_O))
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libpskv.so.1 $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/obj/test/abi/%.o: ROLE_INC := -Itest/abi
$(BUILD)/obj/test/abi/abi_client_1_0.o: test/abi/abi_client.c test/abi/pskv-1.0.h
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) -DPSKV_ABI_1_0 -c $< -o $@

$(BIN)/pskv-abi-1.0: $(BUILD)/obj/test/abi/abi_client_1_0.o $(ABI_UNVERSIONED)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -ldl

$(BIN)/pskv-abi-client: $(BUILD)/obj/test/abi/abi_client.o $(BUILD)/lib/libpskv.so
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -ldl

$(BIN)/pskv-zmq-rtt: $(BUILD)/obj/test/bench/zmq_rtt.o $(COMMON_O)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/pskv-tcp-floor: $(BUILD)/obj/test/bench/tcp_floor.o $(COMMON_O)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/pskv-hashmap-floor: $(BUILD)/obj/test/bench/hashmap_floor.o $(COMMON_O)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/pskv-fault-cost: $(BUILD)/obj/test/bench/fault_cost.o $(COMMON_O)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# the server's shard modules, in process
$(BIN)/pskv-grow-bench: $(BUILD)/obj/test/bench/grow_bench.o $(SERVER_LIB_O) $(COMMON_O)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/pskv-gp-bench: $(BUILD)/obj/test/bench/gp_bench.o $(TUNE_UNIT_O) $(COMMON_O)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/pskv-halfvec-bench: $(BUILD)/obj/test/bench/halfvec_bench.o $(COMMON_O)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/pskv-zmq-bidir: $(BUILD)/obj/test/bench/zmq_bidir.o $(COMMON_O)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/pskv-chain-floor: $(BUILD)/obj/test/bench/chain_floor.o $(BUILD)/obj/common/timeutil.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lzmq

$(BIN)/pskv-metrics-cost: $(BUILD)/obj/test/bench/metrics_cost.o $(COMMON_O)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/pskv-garbage: $(BUILD)/obj/test/tools/garbage.o $(BUILD)/obj/test/tools/garbage_msg.o $(BUILD)/obj/test/tools/garbage_live.o $(COMMON_O)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/pskv-fuzz-replay: $(BUILD)/obj/test/tools/fuzz_wire.o $(BUILD)/obj/test/tools/fuzz_replay.o $(COMMON_O)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bin/pskv-unit: $(UNIT_O) $(SERVER_LIB_O) $(WORKER_UNIT_O) $(SERVE_UNIT_O) $(BUILD)/obj/scheduler/reshard.o \
                        $(BUILD)/obj/scheduler/manifest.o $(SCHED_UNIT_O) $(TUNE_UNIT_O) \
                        $(COMMON_O)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(LDLIBS)

# Rewritten on every build: it carries PREFIX, which may change between runs.
$(BUILD)/pskv.pc: FORCE
	@mkdir -p $(BUILD)
	@printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: pskv\nDescription: pskv parameter server worker library\nVersion: 0.1.0\nRequires.private: libzmq libprotobuf-c libmicrohttpd liblz4 libzstd\nLibs: -L$${libdir} -lpskv\nCflags: -I$${includedir}\n' '$(PREFIX)' > $@

# ---- tests ---------------------------------------------------------------
ASAN_BUILD := build/asan

# Each stage's seconds go to $(TEST_STAGES) (scripts/stage.sh) and are printed at the
# end; the table of where the time goes is in test/README.md. Every fault scenario
# runs once here (one trial is what each assertion needs); the repeated trials and the
# failover figures are `make test-faults` (20 each), also called `make soak`.
# The two builds use every core (BUILD_JOBS) even under a plain `make test`.
TEST_STAGES := build/test-stages.txt
BUILD_JOBS  ?= $(shell nproc 2>/dev/null || echo 2)
test: deps
	@mkdir -p build && : > $(TEST_STAGES)
	scripts/stage.sh $(TEST_STAGES) size scripts/check-size.sh
	scripts/stage.sh $(TEST_STAGES) build $(MAKE) -j$(BUILD_JOBS) all docs-check
	scripts/stage.sh $(TEST_STAGES) asan-build $(MAKE) -j$(BUILD_JOBS) BUILD=$(ASAN_BUILD) SANITIZE=address,undefined all $(ASAN_BUILD)/bin/pskv-unit
	scripts/stage.sh $(TEST_STAGES) unit $(MAKE) BUILD=$(ASAN_BUILD) SANITIZE=address,undefined unit
	scripts/stage.sh $(TEST_STAGES) integration $(MAKE) BUILD=$(ASAN_BUILD) SANITIZE=address,undefined integration RERUN=--rerun-failed
	scripts/stage.sh $(TEST_STAGES) faults $(MAKE) faults FAULT_TRIALS=1 FAULT_FIGURES= RERUN=--rerun-failed
	scripts/stage.sh $(TEST_STAGES) pytest $(MAKE) pytest
	scripts/stage.sh $(TEST_STAGES) package-check $(MAKE) package-check
	@scripts/stage.sh --table $(TEST_STAGES)

# Kill and pause tests on the optimised build (timings as users see them); the
# scenarios that check what a run ends with (checkpoints, joins, drains, the
# evaluator) run FAULT_ONCE_TRIALS times. FAULT_JOBS scenarios at a time (the ones
# tagged serial or root alone, and with FAULT_FIGURES=--figures those that report a
# failover or drain time; make test, one trial each, reports no figure: empty there).
FAULT_TRIALS ?= 3
FAULT_ONCE_TRIALS ?= $(FAULT_TRIALS)
FAULT_JOBS ?= 2
FAULT_FIGURES ?= --figures
faults: all
	PSKV_BIN_DIR=$(abspath $(BIN)) test/faults.sh -j $(FAULT_JOBS) $(FAULT_FIGURES) --trials $(FAULT_TRIALS) --once-trials $(FAULT_ONCE_TRIALS) --tags -quarantine $(RERUN)

# The long campaign: every scenario 20 times, the failover and drain medians and
# worst cases of docs/benchmarks.md.
test-faults soak: deps
	$(MAKE) faults FAULT_TRIALS=20

# The flag reference (docs/reference/PROGRAM.md), written by each program from its
# flag table (`PROGRAM --markdown`); docs-check fails when a committed page is stale.
docs: $(BINS)
	scripts/check-docs.sh --write $(BIN)

docs-check: $(BINS)
	scripts/check-docs.sh $(BIN)

# The size rule (files <= 800 code lines, functions <= 150 unless a 'one piece:' comment says
# why; comments and blank lines do not count).
size:
	scripts/check-size.sh

unit: $(BUILD)/bin/pskv-unit
	CK_DEFAULT_TIMEOUT=60 $(BUILD)/bin/pskv-unit

# RERUN=--rerun-failed (make test only): a test that failed runs once more, alone, and
# counts as passed if it passes then, named on its own line (test/README.md).
# INTEGRATION_JOBS: integration tests run at a time (test/integration.sh -j; the ones
# tagged serial or root always run alone)
INTEGRATION_JOBS ?= 2
integration: all
	PSKV_BIN_DIR=$(abspath $(BIN)) test/integration.sh -j $(INTEGRATION_JOBS) --tags -quarantine $(RERUN)

# The Python package (python/pskv) against real daemons of the optimised build, with
# Debian's interpreter, numpy, pytest and torch (only /usr/bin/python3 loads them).
# Under 2 minutes; CI=true turns a missing torch into failures, never skips.
PYTHON   ?= /usr/bin/python3
pytest: all
	PSKV_LIB=$(abspath $(BUILD)/lib/libpskv.so) PSKV_BIN_DIR=$(abspath $(BIN)) \
	  PSKV_BUILD=$(abspath $(BUILD)) PYTHONPATH=$(abspath python) PYTHONDONTWRITEBYTECODE=1 \
	  timeout 300 $(PYTHON) -m pytest -q -p no:cacheprovider -p no:hypothesispytest python/tests

# ---- fuzzing (clang + libFuzzer); `make test` replays the committed corpus ----
# make fuzz: FUZZ_RUNS executions (default 10^6) per message type, then over every
# type at once (scripts/fuzz.sh; FUZZ_TYPES="PUSH PULL" narrows it).
FUZZ_RUNS ?= 1000000
fuzz: $(GEN_H)
	@mkdir -p build/fuzz
	clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	  -Iinclude/pskv -Icommon -I$(BUILD)/gen $(PKG_CFLAGS) test/tools/fuzz_wire.c common/wire.c common/metacodec.c common/filter.c common/fquant.c common/half.c common/pskv_errors.c \
	  common/zap.c common/keys.c common/refuse.c common/log.c common/timeutil.c common/grow.c common/net.c common/halfvec.c common/fquantvec.c \
	  $(GEN_C) -o build/fuzz/fuzz-wire $(PKG_LIBS) -lpthread
	FUZZ_RUNS=$(FUZZ_RUNS) scripts/fuzz.sh build/fuzz/fuzz-wire

# make fuzz-live: FUZZ_LIVE_SECONDS (default 600) of malformed and mutated
# messages at a running scheduler and servers (ASan + UBSan build; keys off for
# the first half, on for the second) and at workers dialling a fake scheduler;
# then a check job on the same daemons (scripts/fuzz-live.sh).
FUZZ_LIVE_SECONDS ?= 600
fuzz-live: deps
	$(MAKE) BUILD=$(ASAN_BUILD) SANITIZE=address,undefined all
	PSKV_BIN_DIR=$(abspath $(ASAN_BUILD)/bin) scripts/fuzz-live.sh --seconds $(FUZZ_LIVE_SECONDS)

# make tsan: the daemons and libpskv built with ThreadSanitizer (build/tsan), and
# the tests that run their threads: heartbeats, checkpoint writes, ZAP, no-copy
# pushes. Any report fails it (scripts/tsan.sh; suppressions: test/tsan.supp).
TSAN_BUILD := build/tsan
tsan: deps
	$(MAKE) BUILD=$(TSAN_BUILD) SANITIZE=thread all
	TSAN_OPTIONS=halt_on_error=1:exitcode=66:second_deadlock_stack=1:suppressions=$(abspath test/tsan.supp) \
	  scripts/tsan.sh $(abspath $(TSAN_BUILD))

# ---- demo and benchmarks -------------------------------------------------
demo:
	@scripts/install-deps.sh gnuplot-nox
	$(MAKE) all
	scripts/demo.sh

# A short pskv-tune study of the MLP (GP search, ASHA): prints the best trial and the plot
tune-demo:
	@scripts/install-deps.sh gnuplot-nox
	$(MAKE) all
	scripts/tune-demo.sh

bench: deps
	$(MAKE) all
	scripts/bench-pushpull.sh
	scripts/bench-curve.sh --runs 5
	scripts/bench-train.sh
	scripts/bench-consistency.sh
	scripts/bench-sparse.sh --runs 1
	scripts/bench-sparse-push.sh --runs 1
	scripts/bench-hosts.sh
	scripts/bench-faults.sh --kills 10 --soak-seconds 120
	scripts/bench-checkpoint.sh
	scripts/bench-incr.sh
	scripts/bench-allreduce.sh
	scripts/install-deps.sh wrk
	scripts/bench-serve.sh
	scripts/install-deps.sh valgrind
	scripts/bench-metrics.sh --instructions --rounds 3
	scripts/chaos.sh --minutes 5 || [ $$? -eq 77 ]

bench-faults: deps
	$(MAKE) all
	scripts/bench-faults.sh
	scripts/bench-checkpoint.sh

bench-incr: deps
	$(MAKE) all
	scripts/bench-incr.sh

bench-allreduce: deps
	$(MAKE) all
	scripts/bench-allreduce.sh

bench-metrics: deps
	@scripts/install-deps.sh valgrind
	$(MAKE) all
	scripts/bench-metrics.sh --instructions --rounds 3

bench-pushpull: deps
	$(MAKE) all
	scripts/bench-pushpull.sh

bench-curve: deps
	$(MAKE) all
	scripts/bench-curve.sh

bench-train: deps
	$(MAKE) all
	scripts/bench-train.sh

bench-consistency: deps
	$(MAKE) all
	scripts/bench-consistency.sh

bench-balance: deps
	$(MAKE) all
	scripts/bench-balance.sh
	scripts/bench-stages.sh

bench-sparse: deps
	$(MAKE) all
	scripts/bench-sparse.sh
	scripts/bench-sparse-push.sh

bench-hosts: deps
	$(MAKE) all
	scripts/bench-hosts.sh

# pskv-serve's /v1/predict under wrk while a training group runs beside it (pskv-serve
# following its namespace), then from a model file (scripts/bench-serve.sh; installs wrk)
bench-serve: deps
	@scripts/install-deps.sh wrk
	$(MAKE) all
	scripts/bench-serve.sh

# Chaos soak (needs root: network namespaces; 77 = skipped): CHAOS_MINUTES per model,
# async then ssp:4, a random fault every 20-40 s. Exit 0 only on PASS.
CHAOS_MINUTES ?= 5
chaos: deps
	$(MAKE) all
	scripts/chaos.sh --minutes $(CHAOS_MINUTES) || [ $$? -eq 77 ]

# ---- install -------------------------------------------------------------
# The Python package goes where /usr/bin/python3 looks under PREFIX
# (PREFIX/lib/python3.X/dist-packages); the .deb sets PYSITE=/usr/lib/python3/dist-packages.
PYVER    := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 3)
PYSITE   ?= $(PREFIX)/lib/python$(PYVER)/dist-packages
PY_SRC   := $(wildcard python/pskv/*.py)
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(BUILD)/lib/libpskv.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/lib/libpskv.so $(DESTDIR)$(PREFIX)/lib/libpskv.so.1
	ln -sf libpskv.so.1 $(DESTDIR)$(PREFIX)/lib/libpskv.so
	install -m 644 include/pskv/pskv.h include/pskv/pskv_errors.h include/pskv/pskv_updater.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(BUILD)/pskv.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/
	install -d $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 644 $(MANS) $(DESTDIR)$(PREFIX)/share/man/man1/
	install -d $(DESTDIR)$(PYSITE)/pskv
	install -m 644 $(PY_SRC) $(DESTDIR)$(PYSITE)/pskv/
	# the local launcher (launch-local.sh and what it sources), for jobs run by hand
	install -d $(DESTDIR)$(PREFIX)/share/pskv
	install -m 755 scripts/launch-local.sh scripts/launch-lib.sh scripts/free-port.sh \
	  $(DESTDIR)$(PREFIX)/share/pskv/

# make deb: a Debian package of the binaries, library, header, pskv.pc, manual pages
# and systemd unit templates (scripts/make-deb.sh), in $(BUILD)/deb. make
# package-check builds it and checks it with lintian (no errors) and the units with
# systemd-analyze verify.
deb: all
	scripts/make-deb.sh $(BUILD)

package-check:
	$(MAKE) deb
	scripts/check-deb.sh $(BUILD)

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
