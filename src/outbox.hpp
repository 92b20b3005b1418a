// What the outbox's two files share (src/outbox.cpp: emitting; src/outbox_queue.cpp: the
// relay's side).
#pragma once

#include "leased_queue.hpp"

namespace idem::pg::outbox {

// Limits on caller-supplied values (bytes); topic + dedup_key must fit a btree index entry.
constexpr size_t MAX_TOPIC = 255;
constexpr size_t MAX_KEY = 1024;

// How the outbox names things in the leased queues' messages.
extern const queue::Names NAMES;

// True when idempotency.outbox is a Citus table (distributed by idem_distribute()).
bool citus_outbox();

} // namespace idem::pg::outbox
