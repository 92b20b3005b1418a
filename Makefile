# PGXS build of the idempotency extension.
#   make && make install          build and install into the server found by pg_config
#   test/run-all                  the whole test suite (see README)
EXTENSION = idempotency
EXTVERSION = 0.1
MODULE_big = idempotency

# The server-independent core (core/) is compiled into the module as objects;
# src/ holds the thin PostgreSQL layer.
CORE_SRCS = $(sort $(wildcard core/*.cpp))
PG_SRCS = $(sort $(wildcard src/*.cpp))
OBJS = $(PG_SRCS:.cpp=.o) $(CORE_SRCS:.cpp=.o)

# The install script is assembled from the per-feature files in src/sql/.
EXT_SQL_PARTS = $(sort $(wildcard src/sql/*.sql))
DATA_built = $(EXTENSION)--$(EXTVERSION).sql
DATA = $(wildcard $(EXTENSION)--*--*.sql)

PG_CPPFLAGS = -Icore -Isrc
PG_CXXFLAGS = -std=c++17 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Wno-register \
              -fvisibility-inlines-hidden
SHLIB_LINK = -lcrypto -lstdc++

# The core uses C++ features that clang's bitcode pass would need the same flags for;
# JIT inlining of this module buys nothing, so no bitcode is built.
override with_llvm = no

REGRESS = $(patsubst sql/%.sql,%,$(sort $(wildcard sql/*.sql)))
REGRESS_OPTS = --inputdir=. --load-extension=$(EXTENSION)

EXTRA_CLEAN = $(DATA_built)

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

$(EXTENSION)--$(EXTVERSION).sql: $(EXT_SQL_PARTS)
	cat $^ > $@

$(OBJS): $(wildcard core/*.hpp core/*.h src/*.hpp src/*.h)
