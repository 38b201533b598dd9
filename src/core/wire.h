// Wire encoding of request and response lists for the control plane.
//
// Layout (little-endian, as every rank of one job runs the same binary on the same
// kind of machine):
//   header : magic "KOLO" (u32) | version (u8) | kind (u8: 1 requests, 2 responses)
//            | item count (u32)
//   item   : name (u32 length + bytes) | collective (u8) | dtype (i32) | op (i32)
//            | device (i32) | count (i64) | prescale (f64) | postscale (f64) | root (i32)
//            | row_count (i64) | send_rows, member_counts (u32 n + n i64 each)
//            | names_hash (u64) | shapes (u32 n + n i64: ndim, dims... per shape)
//            | member_row_counts (u32 n + n i64) | deterministic (u8: 0 or 1)
//            | into (u8: 0 or 1)
//   response items add: code (i32) | message (u32 length + bytes)
//   a rank report (kind 3, stall_report.h; item count = names listed) :
//            idle seconds (f64) | names in flight (u32) | the names listed
//   init report (kind 4, no items; see init_agreement.h): code (i32) | message
//            | entry count (u32) | entries: name, value (u32 length + bytes each)
// Decoding checks every length against the remaining bytes, every enum against
// its range and that nothing trails, so truncated or corrupted input is an error,
// never a crash.
#pragma once

#include <string>
#include <vector>

#include "common/knobs.h"
#include "common/status.h"
#include "core/request.h"
#include "core/stall_report.h"

namespace kolo::core {

std::string encode_requests(const std::vector<Request>& requests);
std::string encode_responses(const std::vector<Response>& responses);

Status decode_requests(const std::string& bytes, std::vector<Request>* requests);
Status decode_responses(const std::string& bytes, std::vector<Response>* responses);

std::string encode_rank_report(const RankReport& report);
Status decode_rank_report(const std::string& bytes, RankReport* report);

// One rank's report at kolo_init: its status and its configuration fingerprint.
std::string encode_init_report(const Status& status, const std::vector<KnobValue>& entries);
Status decode_init_report(const std::string& bytes, Status* status,
                          std::vector<KnobValue>* entries);

}  // namespace kolo::core
