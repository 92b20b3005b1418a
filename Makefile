# PGXS build of the idempotency extension.
#   make && make install          build and install into the server found by pg_config
#   test/run-all                  the whole test suite (see README)
EXTENSION = idempotency
EXTVERSION = 0.8
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

# Versions (DEVELOPERS.md "Versions and upgrades"): the install script of the first release,
# idempotency--0.1.sql, is assembled from the per-feature files src/sql/[0-4]*.sql; every later
# release ships only an upgrade script idempotency--A--B.sql assembled from its own parts
# (0.1 -> 0.2: src/sql/5*.sql; 0.2 -> 0.3: src/sql/6*.sql; 0.3 -> 0.4: src/sql/7*.sql;
# 0.4 -> 0.5: src/sql/8*.sql; 0.5 -> 0.6: src/sql/9*.sql; 0.6 -> 0.7: src/sql/a*.sql, the digits
# being used up; 0.7 -> 0.8: src/sql/b*.sql).
# CREATE EXTENSION without VERSION installs 0.1 and follows the update path to default_version (idempotency.control), so a fresh
# install and an upgraded one run the same SQL.
EXT_SQL_PARTS = $(call src_files,src/sql/[0-4]*.sql)
EXT_SQL_0_2 = $(call src_files,src/sql/5*.sql)
EXT_SQL_0_3 = $(call src_files,src/sql/6*.sql)
EXT_SQL_0_4 = $(call src_files,src/sql/7*.sql)
EXT_SQL_0_5 = $(call src_files,src/sql/8*.sql)
EXT_SQL_0_6 = $(call src_files,src/sql/9*.sql)
EXT_SQL_0_7 = $(call src_files,src/sql/a*.sql)
EXT_SQL_0_8 = $(call src_files,src/sql/b*.sql)
DATA_built = $(EXTENSION)--0.1.sql $(EXTENSION)--0.1--0.2.sql $(EXTENSION)--0.2--0.3.sql \
             $(EXTENSION)--0.3--0.4.sql $(EXTENSION)--0.4--0.5.sql \
             $(EXTENSION)--0.5--0.6.sql $(EXTENSION)--0.6--0.7.sql \
             $(EXTENSION)--0.7--0.8.sql
DATA = $(filter-out $(DATA_built),$(call src_files,$(EXTENSION)--*--*.sql))

PG_CPPFLAGS = -I$(SRC)/core -I$(SRC)/src
# CXXFLAGS from the environment come last (a package build: dh exports dpkg-buildflags'
# hardening and -ffile-prefix-map there); PGXS takes CXXFLAGS from pg_config and hands the
# environment's CFLAGS on (COPT) to the C compiler only.
ENV_CXXFLAGS := $(if $(filter environment,$(origin CXXFLAGS)),$(CXXFLAGS))
PG_CXXFLAGS = -std=c++17 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Wno-register \
              -fvisibility-inlines-hidden $(ENV_CXXFLAGS)
SHLIB_LINK = -lcrypto -lstdc++

# The core uses C++ features that clang's bitcode pass would need the same flags for;
# JIT inlining of this module buys nothing, so no bitcode is built.
override with_llvm = no

REGRESS = $(patsubst sql/%.sql,%,$(call src_files,sql/*.sql))
REGRESS_OPTS = --inputdir=$(SRC) --load-extension=$(EXTENSION)

EXTRA_CLEAN = $(DATA_built)

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

$(EXTENSION)--0.1.sql: $(EXT_SQL_PARTS)
	cat $^ > $@

$(EXTENSION)--0.1--0.2.sql: $(EXT_SQL_0_2)
	cat $^ > $@

$(EXTENSION)--0.2--0.3.sql: $(EXT_SQL_0_3)
	cat $^ > $@

$(EXTENSION)--0.3--0.4.sql: $(EXT_SQL_0_4)
	cat $^ > $@

$(EXTENSION)--0.4--0.5.sql: $(EXT_SQL_0_5)
	cat $^ > $@

$(EXTENSION)--0.5--0.6.sql: $(EXT_SQL_0_6)
	cat $^ > $@

$(EXTENSION)--0.6--0.7.sql: $(EXT_SQL_0_7)
	cat $^ > $@

$(EXTENSION)--0.7--0.8.sql: $(EXT_SQL_0_8)
	cat $^ > $@

# The object directories by absolute name: VPATH would find the source tree's.
OBJDIRS = $(sort $(addprefix $(CURDIR)/,$(dir $(OBJS))))
$(OBJS): $(call src_files,core/*.hpp core/*.h core/jcs/*.hpp src/*.hpp src/*.h) | $(OBJDIRS)

$(OBJDIRS):
	mkdir -p $@

# The PGXN distribution (DEVELOPERS.md "Packages"): what HEAD holds, as git archive gives it,
# named by META.json's version (the first "version" there, the distribution's).
DISTVERSION = $(shell grep -m 1 '"version":' $(SRC)/META.json | sed 's/.*"version": *"\([^"]*\)".*/\1/')
dist:
	git -C $(SRC) archive --format zip --prefix=$(EXTENSION)-$(DISTVERSION)/ \
	    -o $(abspath $(EXTENSION)-$(DISTVERSION).zip) HEAD

.PHONY: dist
