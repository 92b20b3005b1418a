// Errors raised by the server-independent core. The core never includes postgres.h: an error
// carries the five-character SQLSTATE that the PostgreSQL layer (src/pg_cpp.hpp) reports.
#pragma once

#include <stdexcept>
#include <string>

namespace idem {

// An error a caller can cause; sqlstate is a five-character SQLSTATE such as "22023".
class Error : public std::runtime_error {
  public:
    Error(const char *sqlstate, std::string message, std::string detail = {}, std::string hint = {})
        : std::runtime_error(std::move(message)), sqlstate_(sqlstate), detail_(std::move(detail)),
          hint_(std::move(hint)) {}
    const char *sqlstate() const noexcept { return sqlstate_; }
    const std::string &detail() const noexcept { return detail_; }
    const std::string &hint() const noexcept { return hint_; }

  private:
    const char *sqlstate_;
    std::string detail_;
    std::string hint_;
};

// Thrown by long-running core work when its interrupt check asks it to stop; the PostgreSQL
// layer then lets CHECK_FOR_INTERRUPTS() raise the cancel or timeout error.
class Interrupted : public std::exception {
  public:
    const char *what() const noexcept override { return "interrupted"; }
};

// SQLSTATEs used by the core (names follow PostgreSQL's errcodes.txt).
namespace sqlstate {
inline constexpr const char *invalid_parameter_value = "22023";
inline constexpr const char *null_value_not_allowed = "22004";
inline constexpr const char *string_data_right_truncation = "22001";
inline constexpr const char *datetime_field_overflow = "22008";
inline constexpr const char *invalid_text_representation = "22P02";
inline constexpr const char *character_not_in_repertoire = "22021";
inline constexpr const char *untranslatable_character = "22P05";
inline constexpr const char *numeric_value_out_of_range = "22003";
inline constexpr const char *statement_too_complex = "54001";
inline constexpr const char *program_limit_exceeded = "54000";
inline constexpr const char *invalid_authorization = "28000";
} // namespace sqlstate

} // namespace idem
