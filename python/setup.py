"""Build hook of the `retort` package: generates retort/v1/retort_pb2.py, its type stub
retort_pb2.pyi and the gRPC stubs retort_pb2_grpc.py from proto/retort/v1/retort.proto with
grpcio-tools into the build folder, so the installed package always matches the proto it was
built from and no generated code is committed. The version is the CMake project's
(CMakeLists.txt `project(retort VERSION x.y.z)`), one definition for the C++ and Python halves.

RETORT_SOURCE_DIR names the checkout when this folder is built from a copy (default: the folder
above this one): its proto/ and CMakeLists.txt are read, and retort.binaries looks for the
programs in its build/."""
import os
import pathlib
import re

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent
SOURCE_DIR = pathlib.Path(os.environ.get("RETORT_SOURCE_DIR") or HERE.parent).resolve()
PROTO_ROOT = SOURCE_DIR / "proto"
PROTO = "retort/v1/retort.proto"


def project_version():
    cmake = SOURCE_DIR / "CMakeLists.txt"
    match = re.search(r"project\(retort VERSION ([0-9.]+)", cmake.read_text(encoding="utf-8"))
    if match is None:
        raise SystemExit(f"retort: no `project(retort VERSION x.y.z)` in {cmake}")
    return match.group(1)


class BuildWithStubs(build_py):
    """build_py, then protoc (grpcio-tools) into the build folder."""

    def run(self):
        super().run()
        if not (PROTO_ROOT / PROTO).is_file():
            raise SystemExit(f"retort: {PROTO_ROOT / PROTO} not found: build the package from a "
                             "retort checkout (pip install ./python) or set RETORT_SOURCE_DIR")
        try:
            import grpc_tools
            from grpc_tools import protoc
        except ImportError as error:
            raise SystemExit(f"retort: building needs grpcio-tools ({error}); "
                             "pip install grpcio-tools") from error
        well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
        out = pathlib.Path(self.build_lib)
        (out / "retort" / "v1").mkdir(parents=True, exist_ok=True)
        args = ["grpc_tools.protoc", f"-I{PROTO_ROOT}", f"-I{well_known}", f"--python_out={out}",
                f"--pyi_out={out}", f"--grpc_python_out={out}", str(PROTO_ROOT / PROTO)]
        if protoc.main(args) != 0:
            raise SystemExit(f"retort: protoc failed on {PROTO_ROOT / PROTO}")
        # Where the package was built from: retort.binaries looks for the checkout's build.
        (out / "retort" / "_build_info.py").write_text(
            '"""Written by setup.py when the package was built."""\n'
            f"SOURCE_DIR = {str(SOURCE_DIR)!r}\n", encoding="utf-8")


setup(version=project_version(), cmdclass={"build_py": BuildWithStubs})
