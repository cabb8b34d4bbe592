// HTTP/1.1 as the server writes it and reads header values itself (Boost.Beast parses the
// request; these are the parts it leaves to us): response heads and chunks, media types,
// Accept lists and Origins.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/common/json_text.h"  // Rfc3339, which the routes' JSON uses

namespace execbox::api {

// "HTTP/1.1 200 OK", Date, Server, Content-Type, the extra headers and Connection, each line
// ended; CR and LF in a header value are replaced, so a handler cannot inject a header.
std::string SerializeHead(int status, const std::string& content_type,
                          const std::vector<std::pair<std::string, std::string>>& headers, bool keep_alive);
// One chunk of a chunked body: its size in hex, CRLF, the data, CRLF.
std::string Chunk(std::string_view data);

// A media type without its parameters, lower-cased: "Application/JSON; charset=utf-8" ->
// "application/json".
std::string Essence(std::string_view media_type);
// Whether an Accept header admits `type` (exactly, or through type/* or */*).
bool Accepts(std::string_view accept, std::string_view type);
// http(s)://localhost, 127.0.0.1 or [::1], with any port and nothing else: a page served by this
// machine, which could reach the server directly anyway.
bool IsLoopbackOrigin(std::string_view origin);

// The longest prefix of carry + data that ends on a whole UTF-8 sequence; the cut-off tail
// (at most 3 bytes) stays in `carry` for the next chunk, so a character split across two
// reads of a live stream is not turned into two replacement characters.
std::string WholeUtf8(std::string& carry, std::string_view data);

}  // namespace execbox::api
