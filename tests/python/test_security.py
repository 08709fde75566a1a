"""Security as the C++ clients have it: role rules under mutual TLS (an operator certificate
can stop the job, a worker certificate cannot), the target-name override, bearer tokens."""
from __future__ import annotations

import pathlib
import subprocess

import grpc
import pytest

import retort
from conftest import Cluster, binary


@pytest.fixture(scope="module")
def named_certs(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """Certificates whose coordinator certificate also names coord.example."""
    folder = tmp_path_factory.mktemp("certs")
    subprocess.run([binary("retortctl"), "certs", f"--out={folder}", "--hosts=coord.example"],
                   check=True, capture_output=True, timeout=30)
    return folder


def client(address: str, certs: pathlib.Path, role: str | None, **kw: object) -> retort.Client:
    files = {} if role is None else {"tls_cert": str(certs / f"{role}.crt"),
                                     "tls_key": str(certs / f"{role}.key")}
    return retort.Client(address, tls_ca=str(certs / "ca.crt"), timeout=3, **files,  # type: ignore[arg-type]
                         **kw)  # type: ignore[arg-type]


def test_mutual_tls_roles(cluster: Cluster, named_certs: pathlib.Path) -> None:
    d = named_certs
    c = cluster.coordinator(f"--tls-cert={d}/coordinator.crt", f"--tls-key={d}/coordinator.key",
                            f"--tls-ca={d}/ca.crt")
    with client(c.address, d, "worker") as worker:
        with pytest.raises(retort.PermissionDenied, match="PERMISSION_DENIED"):
            worker.status()
        with pytest.raises(retort.PermissionDenied):
            worker.stop("a worker may not")
    with client(c.address, d, None) as anonymous:  # TLS without a client certificate
        # The server ends the handshake (TLS 1.3: after the client thinks it is done, so gRPC
        # may report the call cancelled rather than the connection unavailable).
        with pytest.raises(retort.Unavailable) as refused:
            anonymous.status()
        assert refused.value.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
    with client(c.address, d, "operator", target_name_override="wrong.example") as misnamed:
        with pytest.raises(retort.Unavailable):
            misnamed.status()
    with client(c.address, d, "operator", target_name_override="coord.example") as operator:
        assert operator.status().state == "waiting"
        assert operator.stop("the operator may").state in ("stopping", "stopped")
    assert c.process is not None and c.process.wait(timeout=10) == 0  # the job ended: it exits


def test_bearer_tokens(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    (tmp_path / "operator.token").write_text("op-secret\n")
    (tmp_path / "worker.token").write_text("worker-secret\n")
    c = cluster.coordinator(f"--operator-token-file={tmp_path / 'operator.token'}",
                            f"--worker-token-file={tmp_path / 'worker.token'}")
    with retort.Client(c.address, token_file=str(tmp_path / "operator.token")) as operator:
        assert operator.status().job == "pyclient"
    with retort.Client(c.address, token_file=str(tmp_path / "worker.token")) as worker:
        with pytest.raises(retort.PermissionDenied):
            worker.status()
    with retort.Client(c.address) as nobody:
        with pytest.raises(retort.Unauthenticated):
            nobody.status()
    with pytest.raises(ValueError, match="holds no token"):
        (tmp_path / "empty.token").write_text("  \n")
        retort.Client(c.address, token_file=str(tmp_path / "empty.token"))
