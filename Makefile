# PGXS build of the idempotency extension.
#   make && make install          build and install into the server found by pg_config
#   test/run-all                  the whole test suite (see README)
EXTENSION = idempotency
EXTVERSION = 2.0.0
MODULE_big = idempotency

# The source tree: the current directory, or VPATH in an out-of-tree build (pg_buildext runs
# `make -C build-NN -f <source>/Makefile VPATH=<source>` once per major). The wildcards below look
# there and keep names relative to it (make finds them through VPATH); the object directories
# are made in the build tree, where the compiler writes.
SRC := $(if $(VPATH),$(VPATH),.)
src_files = $(patsubst $(SRC)/%,%,$(sort $(wildcard $(addprefix $(SRC)/,$(1)))))

# The server-independent core (core/, the canonicaliser in core/jcs/) is compiled into the
# module as objects; src/ holds the thin PostgreSQL layer.
CORE_SRCS = $(call src_files,core/*.cpp core/jcs/*.cpp)
PG_SRCS = $(call src_files,src/*.cpp)
OBJS = $(PG_SRCS:.cpp=.o) $(CORE_SRCS:.cpp=.o)

# Versions (DEVELOPERS.md "Versions and upgrades"): src/sql/idempotency.sql is the install script
# of the current version, the definition of every object once, copied to idempotency--1.1.0.sql;
# a database of an older version is updated by the committed scripts src/sql/idempotency--A--B.sql
# (0.7 and 0.8 -> 1.0.0, 1.0.0 -> 1.1.0), installed as they are. A release adds one such script and bumps
# EXTVERSION and default_version (idempotency.control); test/run-all upgrade checks that a fresh
# installation and an updated one have the same catalog.
DATA_built = $(EXTENSION)--$(EXTVERSION).sql
DATA = $(call src_files,src/sql/$(EXTENSION)--*--*.sql)

PG_CPPFLAGS = -I$(SRC)/core -I$(SRC)/src
# CXXFLAGS from the environment come last (a package build: dh exports dpkg-buildflags'
# hardening and -ffile-prefix-map there); PGXS takes CXXFLAGS from pg_config and hands the
# environment's CFLAGS on (COPT) to the C compiler only.
ENV_CXXFLAGS := $(if $(filter environment,$(origin CXXFLAGS)),$(CXXFLAGS))
PG_CXXFLAGS = -std=c++17 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Wno-register \
              -fvisibility-inlines-hidden $(ENV_CXXFLAGS)
SHLIB_LINK = -lcrypto -lstdc++
# Every CI build treats a warning as an error: test/run-all and test/stages/cassert.sh set
# IDEM_WERROR=1 (make IDEM_WERROR=1, or in the environment); a plain make, and a package build,
# only warn.
ifneq ($(IDEM_WERROR),)
PG_CXXFLAGS += -Werror
endif

# The core uses C++ features that clang's bitcode pass would need the same flags for;
# JIT inlining of this module buys nothing, so no bitcode is built.
override with_llvm = no

# The regress suites: test/regress/sql/NAME.sql against test/regress/expected/NAME.out
REGRESS = $(patsubst test/regress/sql/%.sql,%,$(call src_files,test/regress/sql/*.sql))
REGRESS_OPTS = --inputdir=$(SRC)/test/regress --load-extension=$(EXTENSION)
# make installcheck runs the isolation specs too (test/isolation/specs; ISOLATION= skips them, as
# test/run-all's regress stage does: its isolation stage runs them)
ISOLATION = $(patsubst test/isolation/specs/%.spec,%,$(call src_files,test/isolation/specs/*.spec))
ISOLATION_OPTS = --inputdir=$(SRC)/test/isolation --outputdir=test/isolation/output_iso \
	--load-extension=$(EXTENSION)
# test/regress/sql/upgrade.sql creates databases of 0.7, 1.0.0 and 1.1.0 from frozen scripts,
# which must be in the server's extension directory (test/upgrade/scripts; `test/upgrade/scripts remove` takes
# them out again)
REGRESS_PREP = upgrade-fixtures

EXTRA_CLEAN = $(DATA_built)

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

$(EXTENSION)--$(EXTVERSION).sql: src/sql/$(EXTENSION).sql
	cp $< $@

upgrade-fixtures:
	$(SRC)/test/upgrade/scripts add $(PG_CONFIG)

.PHONY: upgrade-fixtures

# The object directories by absolute name: VPATH would find the source tree's.
OBJDIRS = $(sort $(addprefix $(CURDIR)/,$(dir $(OBJS))))
$(OBJS): $(call src_files,core/*.hpp core/*.h core/jcs/*.hpp src/*.hpp src/*.h) | $(OBJDIRS)

$(OBJDIRS):
	mkdir -p $@

# The PGXN distribution (docs/internals.md "Packages"): what HEAD holds, as git archive gives it,
# named by META.json's version (the first "version" there, the distribution's).
DISTVERSION = $(shell grep -m 1 '"version":' $(SRC)/META.json | sed 's/.*"version": *"\([^"]*\)".*/\1/')
dist:
	git -C $(SRC) archive --format zip --prefix=$(EXTENSION)-$(DISTVERSION)/ \
	    -o $(abspath $(EXTENSION)-$(DISTVERSION).zip) HEAD

.PHONY: dist
