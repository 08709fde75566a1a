"""How the Python client reaches the coordinator: the rules and defaults of the C++ clients
(rpc/client_channel.h): plain TCP; TLS that verifies the coordinator against a CA (`tls_ca`);
mutual TLS presenting an operator certificate (`tls_cert` + `tls_key`, subject OU=operator, as
`retortctl certs` writes them); a bearer token re-read from `token_file` for every call. The
channel keeps alive and reconnects as the C++ channel does (a dead coordinator host is noticed
within 7 s, a restarted coordinator is reached again within about a second).

`target_name_override` checks the coordinator's certificate against that name instead of the
address's host, for coordinators reached by an address their certificate does not list (an IP
address, a port-forward). Certificate files are read when the channel is made; a Client made
afterwards uses rotated files.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import grpc

# rpc/client_channel.cc MakeCoordinatorChannel.
CHANNEL_OPTIONS: Sequence[tuple[str, int]] = (
    ("grpc.keepalive_time_ms", 2000),
    ("grpc.keepalive_timeout_ms", 5000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.initial_reconnect_backoff_ms", 100),
    # The least time one connection attempt gets (see rpc/client_channel.cc).
    ("grpc.min_reconnect_backoff_ms", 3000),
    ("grpc.max_reconnect_backoff_ms", 1000),
)

# The C++ clients' defaults (tools/retortctl.cc).
DEFAULT_ADDRESS = "127.0.0.1:7070"
DEFAULT_TIMEOUT_S = 5.0

# rpc/metadata.h
AUTHORIZATION_METADATA = "authorization"
BEARER_PREFIX = "Bearer "


@dataclass(frozen=True)
class ClientSecurity:
    """PEM files. tls_ca alone: TLS. tls_cert and tls_key as well: mutual TLS. None: plain TCP."""

    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    token_file: str | None = None
    target_name_override: str | None = None

    @property
    def tls(self) -> bool:
        return bool(self.tls_ca)

    def validate(self) -> None:
        """ValueError naming the argument when the combination is incomplete or a file is
        unreadable (ValidateClientSecurity's rules)."""
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("tls_cert and tls_key go together")
        if self.tls_cert and not self.tls_ca:
            raise ValueError("tls_cert needs tls_ca: the CA that signed the coordinator's "
                             "certificate")
        if self.target_name_override and not self.tls_ca:
            raise ValueError("target_name_override needs tls_ca (it names the certificate "
                             "to expect)")
        for name in ("tls_ca", "tls_cert", "tls_key"):
            path = getattr(self, name)
            if path and not os.access(path, os.R_OK):
                raise ValueError(f"{name}={path}: not a readable file")
        if self.token_file:
            read_token_file(self.token_file)

    def credentials(self) -> grpc.ChannelCredentials:
        def read(path: str | None) -> bytes | None:
            if not path:
                return None
            with open(path, "rb") as f:
                return f.read()

        return grpc.ssl_channel_credentials(root_certificates=read(self.tls_ca),
                                            private_key=read(self.tls_key),
                                            certificate_chain=read(self.tls_cert))

    def token_metadata(self) -> list[tuple[str, str]]:
        """("authorization", "Bearer TOKEN") read now, or nothing when there is no token file
        or it cannot be read (the call is then refused as unauthenticated, as in C++)."""
        if not self.token_file:
            return []
        try:
            token = read_token_file(self.token_file)
        except ValueError:
            return []
        return [(AUTHORIZATION_METADATA, BEARER_PREFIX + token)]


def read_token_file(path: str) -> str:
    """A bearer token file's one word (common/credential_files.h ReadTokenFile)."""
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except OSError as error:
        raise ValueError(f"token file {path}: {error.strerror}") from error
    if not token:
        raise ValueError(f"token file {path} holds no token")
    if any(c in token for c in " \t\r\n"):
        raise ValueError(f"token file {path}: a token is one word")
    return token


def make_channel(address: str, security: ClientSecurity) -> grpc.Channel:
    options = list(CHANNEL_OPTIONS)
    if not security.tls:
        return grpc.insecure_channel(address, options=options)
    if security.target_name_override:
        options.append(("grpc.ssl_target_name_override", security.target_name_override))  # type: ignore[arg-type]
    return grpc.secure_channel(address, security.credentials(), options=options)
