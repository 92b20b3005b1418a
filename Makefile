# PGXS build of the idempotency extension.
#   make && make install          build and install into the server found by pg_config
#   test/run-all                  the whole test suite (see README)
EXTENSION = idempotency
EXTVERSION = 0.8
MODULE_big = idempotency

# The server-independent core (core/, the canonicaliser in core/jcs/) is compiled into the
# module as objects; src/ holds the thin PostgreSQL layer.
CORE_SRCS = $(sort $(wildcard core/*.cpp core/jcs/*.cpp))
PG_SRCS = $(sort $(wildcard src/*.cpp))
OBJS = $(PG_SRCS:.cpp=.o) $(CORE_SRCS:.cpp=.o)

# Versions (DEVELOPERS.md "Versions and upgrades"): the install script of the first release,
# idempotency--0.1.sql, is assembled from the per-feature files src/sql/[0-4]*.sql; every later
# release ships only an upgrade script idempotency--A--B.sql assembled from its own parts
# (0.1 -> 0.2: src/sql/5*.sql; 0.2 -> 0.3: src/sql/6*.sql; 0.3 -> 0.4: src/sql/7*.sql;
# 0.4 -> 0.5: src/sql/8*.sql; 0.5 -> 0.6: src/sql/9*.sql; 0.6 -> 0.7: src/sql/a*.sql, the digits
# being used up; 0.7 -> 0.8: src/sql/b*.sql).
# CREATE EXTENSION without VERSION installs 0.1 and follows the update path to default_version (idempotency.control), so a fresh
# install and an upgraded one run the same SQL.
EXT_SQL_PARTS = $(sort $(wildcard src/sql/[0-4]*.sql))
EXT_SQL_0_2 = $(sort $(wildcard src/sql/5*.sql))
EXT_SQL_0_3 = $(sort $(wildcard src/sql/6*.sql))
EXT_SQL_0_4 = $(sort $(wildcard src/sql/7*.sql))
EXT_SQL_0_5 = $(sort $(wildcard src/sql/8*.sql))
EXT_SQL_0_6 = $(sort $(wildcard src/sql/9*.sql))
EXT_SQL_0_7 = $(sort $(wildcard src/sql/a*.sql))
EXT_SQL_0_8 = $(sort $(wildcard src/sql/b*.sql))
DATA_built = $(EXTENSION)--0.1.sql $(EXTENSION)--0.1--0.2.sql $(EXTENSION)--0.2--0.3.sql \
             $(EXTENSION)--0.3--0.4.sql $(EXTENSION)--0.4--0.5.sql \
             $(EXTENSION)--0.5--0.6.sql $(EXTENSION)--0.6--0.7.sql \
             $(EXTENSION)--0.7--0.8.sql
DATA = $(filter-out $(DATA_built),$(wildcard $(EXTENSION)--*--*.sql))

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

$(OBJS): $(wildcard core/*.hpp core/*.h core/jcs/*.hpp src/*.hpp src/*.h)
