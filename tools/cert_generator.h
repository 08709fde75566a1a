// `retortctl certs`: a CA and the coordinator, worker and operator certificates of a test
// cluster, made with OpenSSL's libcrypto (ECDSA P-256, SHA-256). Roles are the subject's OU
// (coordinator/authorizer.h): OU=worker, OU=operator. Not thread-safe (one call at a time).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace retort::tools {

struct CertOptions {
  // Folder that receives ca.crt, ca.key, coordinator.{crt,key}, worker.{crt,key} and
  // operator.{crt,key} (keys mode 0600). When it already holds ca.crt and ca.key, that CA
  // signs the new certificates (rotation keeps the trust chain).
  std::string out_dir;
  // Names and addresses the coordinator's certificate is valid for, besides localhost,
  // 127.0.0.1 and ::1 (e.g. retort-coordinator.retort.svc).
  std::vector<std::string> hosts;
  int days = 365;
};

// The files written, in order. INVALID_ARGUMENT for a bad host name or day count; INTERNAL
// naming the OpenSSL call that failed.
StatusOr<std::vector<std::string>> GenerateClusterCertificates(const CertOptions& options);

}  // namespace retort::tools
