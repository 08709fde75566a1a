#include "tools/cert_generator.h"

#include <arpa/inet.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <sys/stat.h>

#include <cctype>
#include <functional>
#include <memory>

#include "common/file_util.h"

namespace retort::tools {
namespace {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(BIGNUM* p) const { BN_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Free>;
using Cert = std::unique_ptr<X509, Free>;
using Bio = std::unique_ptr<BIO, Free>;

Status OpensslError(const std::string& what) {
  std::string detail;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    detail += std::string(detail.empty() ? "" : "; ") + buf;
  }
  return InternalError("openssl: " + what + (detail.empty() ? "" : ": " + detail));
}

bool IsIp(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

bool ValidHost(const std::string& host) {
  if (host.empty() || host.size() > 253) return false;
  if (IsIp(host)) return true;
  for (char c : host)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '*'))
      return false;
  return true;
}

StatusOr<std::string> Pem(const std::function<int(BIO*)>& write, const std::string& what) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get()) != 1) return OpensslError("writing " + what);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, Free> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1)
    return OpensslError(std::string("adding ") + OBJ_nid2sn(nid) + " " + value);
  return Status::Ok();
}

struct Issued {
  Key key;
  Cert cert;
};

// A certificate for a new P-256 key with subject O=retort,OU=`ou`,CN=`cn`, signed by `ca`
// (self-signed when `ca` is null: then it is a CA).
StatusOr<Issued> Issue(const std::string& cn, const std::string& ou, const Issued* ca,
                       const std::string& san, const std::string& eku, int days) {
  Issued out;
  out.key.reset(EVP_EC_gen("P-256"));
  if (!out.key) return OpensslError("generating a P-256 key");
  out.cert.reset(X509_new());
  X509* x = out.cert.get();
  std::unique_ptr<BIGNUM, Free> serial(BN_new());
  if (!x || !serial || X509_set_version(x, 2) != 1 ||
      BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(x)) == nullptr ||
      X509_gmtime_adj(X509_getm_notBefore(x), -300) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(x), static_cast<long>(days) * 86400) == nullptr ||
      X509_set_pubkey(x, out.key.get()) != 1)
    return OpensslError("filling the certificate of " + cn);
  X509_NAME* name = X509_get_subject_name(x);
  for (auto [field, value] : {std::pair{"O", std::string("retort")}, {"OU", ou}, {"CN", cn}})
    if (X509_NAME_add_entry_by_txt(name, field, MBSTRING_ASC,
                                   reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1,
                                   0) != 1)
      return OpensslError(std::string("setting ") + field + "=" + value);
  X509* issuer = ca ? ca->cert.get() : x;
  if (X509_set_issuer_name(x, X509_get_subject_name(issuer)) != 1)
    return OpensslError("setting the issuer of " + cn);
  RETORT_RETURN_IF_ERROR(AddExtension(x, issuer, NID_basic_constraints,
                                      ca ? "critical,CA:FALSE" : "critical,CA:TRUE"));
  RETORT_RETURN_IF_ERROR(AddExtension(
      x, issuer, NID_key_usage,
      ca ? "critical,digitalSignature,keyEncipherment" : "critical,keyCertSign,cRLSign"));
  RETORT_RETURN_IF_ERROR(AddExtension(x, issuer, NID_subject_key_identifier, "hash"));
  if (ca) {
    RETORT_RETURN_IF_ERROR(AddExtension(x, issuer, NID_authority_key_identifier, "keyid:always"));
    RETORT_RETURN_IF_ERROR(AddExtension(x, issuer, NID_ext_key_usage, eku));
  }
  if (!san.empty()) RETORT_RETURN_IF_ERROR(AddExtension(x, issuer, NID_subject_alt_name, san));
  if (X509_sign(x, ca ? ca->key.get() : out.key.get(), EVP_sha256()) == 0)
    return OpensslError("signing the certificate of " + cn);
  return out;
}

Status WritePair(const std::string& dir, const std::string& stem, const Issued& issued,
                 std::vector<std::string>* written) {
  RETORT_ASSIGN_OR_RETURN(
      std::string cert,
      Pem([&](BIO* b) { return PEM_write_bio_X509(b, issued.cert.get()); }, stem + ".crt"));
  RETORT_ASSIGN_OR_RETURN(std::string key, Pem(
                                               [&](BIO* b) {
                                                 return PEM_write_bio_PrivateKey(
                                                     b, issued.key.get(), nullptr, nullptr, 0,
                                                     nullptr, nullptr);
                                               },
                                               stem + ".key"));
  const std::string key_path = dir + "/" + stem + ".key";
  const mode_t old_umask = umask(077);  // the key is never readable by others, not even briefly
  Status wrote = WriteFileAtomically(key_path, key);
  umask(old_umask);
  RETORT_RETURN_IF_ERROR(wrote);
  if (chmod(key_path.c_str(), 0600) != 0) return InternalError("chmod 0600 " + key_path);
  RETORT_RETURN_IF_ERROR(WriteFileAtomically(dir + "/" + stem + ".crt", cert));
  written->push_back(dir + "/" + stem + ".crt");
  written->push_back(key_path);
  return Status::Ok();
}

StatusOr<Issued> LoadCa(const std::string& dir) {
  Issued ca;
  RETORT_ASSIGN_OR_RETURN(std::string cert, ReadFileToString(dir + "/ca.crt"));
  RETORT_ASSIGN_OR_RETURN(std::string key, ReadFileToString(dir + "/ca.key"));
  Bio cb(BIO_new_mem_buf(cert.data(), static_cast<int>(cert.size())));
  Bio kb(BIO_new_mem_buf(key.data(), static_cast<int>(key.size())));
  ca.cert.reset(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr));
  ca.key.reset(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
  if (!ca.cert || !ca.key) return OpensslError("reading the CA in " + dir);
  return ca;
}

}  // namespace

StatusOr<std::vector<std::string>> GenerateClusterCertificates(const CertOptions& o) {
  if (o.out_dir.empty()) return InvalidArgumentError("--out is required");
  if (o.days < 1 || o.days > 3650)
    return InvalidArgumentError("--days must be in [1, 3650], got " + std::to_string(o.days));
  std::string san = "DNS:localhost,IP:127.0.0.1,IP:::1";
  for (const auto& h : o.hosts) {
    if (!ValidHost(h)) return InvalidArgumentError("--hosts: '" + h + "' is not a host name or IP");
    san += (IsIp(h) ? ",IP:" : ",DNS:") + h;
  }
  RETORT_RETURN_IF_ERROR(MakeDirectories(o.out_dir));
  std::vector<std::string> written;
  Issued ca;
  if (PathExists(o.out_dir + "/ca.crt") && PathExists(o.out_dir + "/ca.key")) {
    RETORT_ASSIGN_OR_RETURN(ca, LoadCa(o.out_dir));
  } else {
    RETORT_ASSIGN_OR_RETURN(ca, Issue("retort test CA", "ca", nullptr, "", "", o.days));
    RETORT_RETURN_IF_ERROR(WritePair(o.out_dir, "ca", ca, &written));
  }
  struct Leaf {
    const char* stem;
    const char* ou;
    std::string san;
    const char* eku;
  };
  for (const Leaf& leaf : {Leaf{"coordinator", "coordinator", san, "serverAuth"},
                           Leaf{"worker", "worker", "", "clientAuth"},
                           Leaf{"operator", "operator", "", "clientAuth"}}) {
    RETORT_ASSIGN_OR_RETURN(Issued issued, Issue(std::string("retort ") + leaf.stem, leaf.ou, &ca,
                                                 leaf.san, leaf.eku, o.days));
    RETORT_RETURN_IF_ERROR(WritePair(o.out_dir, leaf.stem, issued, &written));
  }
  return written;
}

}  // namespace retort::tools
