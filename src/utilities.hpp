// Utilities other functions use (src/utilities.cpp).
#pragma once

#include "pg_cpp.hpp"

extern "C" {
#include "utils/uuid.h"
}

namespace idem::pg {

// The session's next RFC 9562 version 7 UUID (strictly increasing within the session), palloc'd.
pg_uuid_t *new_uuid_v7();

} // namespace idem::pg
