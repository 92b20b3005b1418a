# PGXS build of the idempotency extension.
#   make && make install          build and install into the server found by pg_config
#   test/run-all                  the whole test suite (see README)
EXTENSION = idempotency
EXTVERSION = 1.0.0
MODULE_big = idempotency

# The server-independent core (core/, the canonicaliser in core/jcs/) is compiled into the
# module as objects; src/ holds the thin PostgreSQL layer.
CORE_SRCS = $(sort $(wildcard core/*.cpp core/jcs/*.cpp))
PG_SRCS = $(sort $(wildcard src/*.cpp))
OBJS = $(PG_SRCS:.cpp=.o) $(CORE_SRCS:.cpp=.o)

# Versions (DEVELOPERS.md "Versions and upgrades"): src/sql/idempotency.sql is the install script
# of the current version, the definition of every object once, copied to idempotency--1.0.0.sql;
# a database of an older version is updated by the committed scripts src/sql/idempotency--A--B.sql
# (0.7 and 0.8 -> 1.0.0), installed as they are. A release adds one such script and bumps
# EXTVERSION and default_version (idempotency.control); test/run-all upgrade checks that a fresh
# installation and an updated one have the same catalog.
DATA_built = $(EXTENSION)--$(EXTVERSION).sql
DATA = $(sort $(wildcard src/sql/$(EXTENSION)--*--*.sql))

PG_CPPFLAGS = -Icore -Isrc
PG_CXXFLAGS = -std=c++17 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Wno-register \
              -fvisibility-inlines-hidden
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

REGRESS = $(patsubst sql/%.sql,%,$(sort $(wildcard sql/*.sql)))
REGRESS_OPTS = --inputdir=. --load-extension=$(EXTENSION)

EXTRA_CLEAN = $(DATA_built)

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

$(EXTENSION)--$(EXTVERSION).sql: src/sql/$(EXTENSION).sql
	cp $< $@

$(OBJS): $(wildcard core/*.hpp core/*.h core/jcs/*.hpp src/*.hpp src/*.h)
